//! The byte encoding of build-cache records: length-prefixed fields and
//! LEB128 integers, no field names, paths of a snapshot stored as the
//! bytes they add to the path before them. A record is a head and the
//! [`Piece`]s it names, so that a build after an edit writes only where
//! the edit is.
//!
//! A record is untrusted input (another process may have truncated or
//! scribbled on it): every read is bounds-checked, no count is trusted for
//! an allocation larger than the bytes that remain, and any inconsistency
//! is an error, never a panic. Decoding a record costs about one pass over
//! its bytes, a fraction of parsing the same record as JSON.

/// Why a record cannot be decoded; the caller says only "damaged".
#[derive(Debug, PartialEq, Eq)]
pub struct Damaged;

pub type Result<T> = std::result::Result<T, Damaged>;

/// Appends fields to a buffer.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, b: u8) {
        self.buf.push(b);
    }

    pub fn uint(&mut self, n: u128) {
        if let Ok(n) = u64::try_from(n) {
            return self.u64(n);
        }
        let mut n = n;
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.buf.push(low);
                return;
            }
            self.buf.push(low | 0x80);
        }
    }

    /// LEB128, built in a register: a record holds tens of thousands.
    pub fn u64(&mut self, mut n: u64) {
        let mut tmp = [0u8; 10];
        let mut len = 0;
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                tmp[len] = low;
                len += 1;
                break;
            }
            tmp[len] = low | 0x80;
            len += 1;
        }
        self.buf.extend_from_slice(&tmp[..len]);
    }

    pub fn usize(&mut self, n: usize) {
        self.uint(n as u128);
    }

    /// Zig-zag, so that small negative numbers stay short.
    pub fn int(&mut self, n: i128) {
        self.uint(((n << 1) ^ (n >> 127)) as u128);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.usize(b.len());
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.u8(0),
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
        }
    }

    /// `s`, as the bytes it adds to `prev` (sorted neighbours share most).
    pub fn str_after(&mut self, prev: &str, s: &str) {
        let shared = prev
            .bytes()
            .zip(s.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        self.usize(shared);
        self.bytes(&s.as_bytes()[shared..]);
    }

    /// Raw bytes of a length both sides know.
    pub fn fixed(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
}

/// Reads fields from a record's bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn u8(&mut self) -> Result<u8> {
        let (&b, rest) = self.buf.split_first().ok_or(Damaged)?;
        self.buf = rest;
        Ok(b)
    }

    pub fn bool(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Damaged),
        }
    }

    #[inline]
    pub fn uint(&mut self) -> Result<u128> {
        // Up to nine bytes (63 bits: every size, inode and time a record
        // holds) in a 64-bit register: the 128-bit loop was a quarter of
        // decoding a snapshot, which a no-op build does for every file.
        let mut n: u64 = 0;
        let head = &self.buf[..self.buf.len().min(9)];
        for (i, &b) in head.iter().enumerate() {
            n |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if i > 0 && b == 0 {
                    return Err(Damaged);
                }
                self.buf = &self.buf[i + 1..];
                return Ok(u128::from(n));
            }
        }
        self.uint_long()
    }

    /// [`Self::uint`] of more than nine bytes, or of bytes that end early.
    fn uint_long(&mut self) -> Result<u128> {
        let mut n: u128 = 0;
        for shift in (0..128).step_by(7) {
            let b = self.u8()?;
            let part = u128::from(b & 0x7f);
            // Bits past the 128th mean the bytes are not ours.
            if shift > 0 && part >> (128 - shift) != 0 {
                return Err(Damaged);
            }
            n |= part << shift;
            if b & 0x80 == 0 {
                // Written in as few bytes as it takes, as [`Writer::uint`]
                // writes it: a record read is written back byte for byte.
                if shift > 0 && b == 0 {
                    return Err(Damaged);
                }
                return Ok(n);
            }
        }
        Err(Damaged)
    }

    pub fn u64(&mut self) -> Result<u64> {
        u64::try_from(self.uint()?).map_err(|_| Damaged)
    }

    pub fn u32(&mut self) -> Result<u32> {
        u32::try_from(self.uint()?).map_err(|_| Damaged)
    }

    pub fn usize(&mut self) -> Result<usize> {
        usize::try_from(self.uint()?).map_err(|_| Damaged)
    }

    pub fn int(&mut self) -> Result<i128> {
        let z = self.uint()?;
        Ok(((z >> 1) as i128) ^ -((z & 1) as i128))
    }

    /// A count of items that take at least one byte each: never more than
    /// the bytes left, so that a forged count cannot ask for a huge
    /// allocation.
    pub fn count(&mut self) -> Result<usize> {
        let n = self.usize()?;
        if n > self.buf.len() {
            return Err(Damaged);
        }
        Ok(n)
    }

    pub fn fixed(&mut self, len: usize) -> Result<&'a [u8]> {
        if len > self.buf.len() {
            return Err(Damaged);
        }
        let (b, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(b)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let len = self.usize()?;
        self.fixed(len)
    }

    pub fn str(&mut self) -> Result<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| Damaged)
    }

    pub fn string(&mut self) -> Result<String> {
        self.str().map(str::to_owned)
    }

    pub fn opt_string(&mut self) -> Result<Option<String>> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.string().map(Some),
            _ => Err(Damaged),
        }
    }

    /// A string written by [`Writer::str_after`] `prev`, which shares
    /// all it can.
    pub fn string_after(&mut self, prev: &str) -> Result<String> {
        let shared = self.usize()?;
        let head = prev.as_bytes().get(..shared).ok_or(Damaged)?;
        let tail = self.bytes()?;
        if tail
            .first()
            .is_some_and(|b| prev.as_bytes().get(shared) == Some(b))
        {
            return Err(Damaged);
        }
        let mut s = Vec::with_capacity(shared + tail.len());
        s.extend_from_slice(head);
        s.extend_from_slice(tail);
        String::from_utf8(s).map_err(|_| Damaged)
    }

    /// `n` items read by `each`.
    pub fn list<T>(&mut self, mut each: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        let n = self.count()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(each(self)?);
        }
        Ok(out)
    }
}

/// 16 bytes from 32 lower-case hex digits, as [`super::key::hex`] writes them.
pub fn unhex16(s: &str) -> Option<[u8; 16]> {
    // A digit's value, or 0xff: one load per digit, as a record holds a
    // hash per file.
    const DIGIT: [u8; 256] = {
        let mut t = [0xffu8; 256];
        let mut c = 0;
        while c < 10 {
            t[b'0' as usize + c] = c as u8;
            c += 1;
        }
        let mut c = 0;
        while c < 6 {
            t[b'a' as usize + c] = 10 + c as u8;
            c += 1;
        }
        t
    };
    let b: &[u8; 32] = s.as_bytes().try_into().ok()?;
    let mut out = [0u8; 16];
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
        let (hi, lo) = (DIGIT[usize::from(pair[0])], DIGIT[usize::from(pair[1])]);
        bad |= hi | lo;
        *o = hi << 4 | (lo & 0xf);
    }
    (bad & 0xf0 == 0).then_some(out)
}

// ------------------------------------------------------------ records

use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

use super::Record;
use super::incremental::{BuildRecord, Files, JobRecord, PartRecord, SourceRecord};
use super::snapshot::{Census, Entry, FileState, Kind, Sig};
use crate::pipeline::Summary;

/// How every record starts; the format number follows. A record of
/// format 5 or older is JSON, and starts with `{`.
pub const MAGIC: &[u8] = b"trainc build record\n";

/// Snapshot entries per piece (about 60 KB): an edit of one job rewrites
/// the one or two pieces of its directory that hold its files.
pub const ENTRIES_PER_PIECE: usize = 1024;
/// Definition files' records per piece (about 80 KB).
pub const SOURCES_PER_PIECE: usize = 64;

/// A run of a record's items (a directory's snapshot entries, or the
/// definition files' records), kept in a file of its own named by the
/// [`checksum`] of its bytes. A build after an edit writes the pieces that
/// hold what changed and a head that names them all, and leaves the other
/// pieces where they are: a record written whole after every edit was
/// most of what an edit's `build` paid beyond the jobs it compiled, and
/// it grew with the project (11 MB at 5,000 jobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub sum: u64,
    /// Its length in bytes.
    pub len: usize,
    /// How many items it holds; never none.
    pub items: usize,
}

/// A record as [`write()`] encodes it: its head, the pieces it names, and
/// the bytes of those that were not read with the record it came from.
pub struct Encoded {
    pub head: Vec<u8>,
    pub named: Vec<Piece>,
    pub pieces: Vec<(Piece, Vec<u8>)>,
}

/// A definition file's parts as the record read holds them.
#[derive(Clone)]
pub enum Body {
    /// In the piece it was read from: the records of a piece share its
    /// bytes, not a copy each.
    Read {
        piece: std::sync::Arc<Vec<u8>>,
        range: std::ops::Range<usize>,
    },
    /// In a piece that was not read, because none of its files changed
    /// ([`FilePiece::digest`]): the record is a stand-in that only names
    /// its piece again, and holds nothing else.
    Unread,
}

impl std::ops::Deref for Body {
    type Target = [u8];

    /// The bytes; none for [`Body::Unread`], which no reader takes for a
    /// record (it is damaged).
    fn deref(&self) -> &[u8] {
        match self {
            // In bounds: made only from a slice of the piece.
            Body::Read { piece, range } => piece.get(range.clone()).unwrap_or_default(),
            Body::Unread => &[],
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Read { .. } => write!(f, "Body({} bytes)", self.len()),
            Body::Unread => write!(f, "Unread"),
        }
    }
}

/// A piece of the per-file part, with the [`digest`] of the files whose
/// records it holds: an edit reads only the pieces whose files, at the
/// same places in the list, no longer give that digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilePiece {
    pub piece: Piece,
    pub digest: u64,
}

/// What the rules across files need of a set's documents, over every
/// definition file: how many there are, their output floors, their
/// namespaces. An edit that keeps its jobs' names and claims adjusts these
/// by what it compiled, without reading the other files' records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartSum {
    pub docs: usize,
    pub budget: u64,
    /// Sorted, each once.
    pub namespaces: Vec<String>,
}

/// The per-file part of a record read, as its head names it; only an
/// incremental build reads its pieces ([`decode_piece`]).
#[derive(Debug, Clone)]
pub struct FilesRef {
    /// [`super::Request::global_key`] of the build.
    pub global: String,
    /// One per set resolved.
    pub sums: Vec<PartSum>,
    pub pieces: Vec<FilePiece>,
}

/// The digest of definition files by path, [`super::key::source_hash`]
/// and whether they had warnings, in order: as their records give them,
/// and as a build that finds them unchanged gives them (with no warnings,
/// since a file with warnings is compiled every time).
pub fn digest<'a>(files: impl Iterator<Item = (&'a Path, &'a str, bool)>) -> u64 {
    // Sized for paths of a few dozen bytes: an edit digests every piece.
    let mut w = Writer {
        buf: Vec::with_capacity(files.size_hint().0 * 96),
    };
    for (path, hash, warned) in files {
        w.bytes(path.as_os_str().as_bytes());
        w.str(hash);
        w.u8(u8::from(warned));
    }
    checksum(&w.buf)
}

/// A record's head and new pieces. The head is the magic, the format, and
/// one section (its length, its bytes, their [`checksum`]): the key,
/// whether the build warned, contexts and destinations, each directory's
/// snapshot as the pieces that hold it, and the per-file part as its
/// pieces: the record's `files` when it has them, else `read_files` as
/// read. `reuse`: for each
/// directory, its snapshot's pieces as read and which entries changed
/// since; a piece none of whose entries changed is named again, not
/// written.
pub fn write(record: &Record, reuse: &[Option<Reuse>]) -> Result<Encoded> {
    let mut pieces = Vec::new();
    let mut named = Vec::new();
    let mut main = Writer::default();
    main.str(&record.key);
    main.u8(u8::from(record.warned));
    // A few contexts at most: their JSON costs nothing to parse.
    main.bytes(&serde_json::to_vec(&record.contexts).unwrap_or_default());
    main.usize(record.dests.len());
    for (dir, n) in &record.dests {
        main.bytes(dir.as_os_str().as_bytes());
        main.usize(*n);
    }
    main.usize(record.outputs.len());
    for (i, (dir, entries)) in record.outputs.iter().enumerate() {
        main.bytes(dir.as_os_str().as_bytes());
        match entries {
            None => main.u8(0),
            Some(entries) => {
                main.u8(1);
                let reuse = reuse.get(i).and_then(Option::as_ref);
                let list = entry_pieces(entries, reuse, &mut pieces);
                write_pieces(&mut main, &list);
                named.extend(list);
                // Counted here only when the build did not adjust it.
                let counted;
                let census = match record.census.get(i).and_then(Option::as_ref) {
                    Some(c) => c,
                    None => {
                        counted = Census::of(entries);
                        &counted
                    }
                };
                main.usize(census.owned);
                main.uint(u128::from(census.bytes));
                main.usize(census.foreign.len());
                for &f in &census.foreign {
                    main.usize(f);
                }
            }
        }
    }
    let write_sums = |w: &mut Writer, sums: &[PartSum]| {
        w.usize(sums.len());
        for s in sums {
            w.usize(s.docs);
            w.uint(u128::from(s.budget));
            write_strs(w, &s.namespaces);
        }
    };
    let write_file_pieces = |w: &mut Writer, list: &[FilePiece]| {
        w.usize(list.len());
        for p in list {
            w.fixed(&p.piece.sum.to_le_bytes());
            w.usize(p.piece.len);
            w.usize(p.piece.items);
            w.fixed(&p.digest.to_le_bytes());
        }
    };
    match (&record.files, &record.read_files) {
        (Some(files), _) => {
            main.u8(1);
            main.str(&files.global);
            write_sums(&mut main, &files.sums);
            let list = source_pieces(files, &mut pieces)?;
            write_file_pieces(&mut main, &list);
            named.extend(list.iter().map(|p| p.piece));
        }
        (None, Some(read)) => {
            main.u8(1);
            main.str(&read.global);
            write_sums(&mut main, &read.sums);
            write_file_pieces(&mut main, &read.pieces);
            named.extend(read.pieces.iter().map(|p| p.piece));
        }
        (None, None) => main.u8(0),
    }
    let mut head = Writer::default();
    head.fixed(MAGIC);
    head.uint(u128::from(record.format));
    head.bytes(&main.buf);
    head.fixed(&checksum(&main.buf).to_le_bytes());
    Ok(Encoded {
        head: head.buf,
        named,
        pieces,
    })
}

fn write_pieces(w: &mut Writer, pieces: &[Piece]) {
    w.usize(pieces.len());
    for p in pieces {
        w.fixed(&p.sum.to_le_bytes());
        w.usize(p.len);
        w.usize(p.items);
    }
}

fn read_pieces(r: &mut Reader) -> Result<Vec<Piece>> {
    r.list(read_piece)
}

fn read_piece(r: &mut Reader) -> Result<Piece> {
    let sum = read_u64(r)?;
    let len = r.usize()?;
    let items = r.usize()?;
    // Every item takes a byte at least.
    if items == 0 || items > len {
        return Err(Damaged);
    }
    Ok(Piece { sum, len, items })
}

fn read_u64(r: &mut Reader) -> Result<u64> {
    Ok(u64::from_le_bytes(
        r.fixed(8)?.try_into().map_err(|_| Damaged)?,
    ))
}

/// Where `n` items are cut into pieces: as the pieces `read` cut them
/// when they hold `n` items (then `true`), else into runs of `size`.
fn cuts(n: usize, read: Option<&[Piece]>, size: usize) -> (Vec<std::ops::Range<usize>>, bool) {
    if let Some(read) = read
        && read.iter().try_fold(0usize, |n, p| n.checked_add(p.items)) == Some(n)
    {
        let mut at = 0;
        let cuts = read
            .iter()
            .map(|p| {
                at += p.items;
                at - p.items..at
            })
            .collect();
        return (cuts, true);
    }
    let cuts = (0..n).step_by(size).map(|s| s..(s + size).min(n)).collect();
    (cuts, false)
}

fn new_piece(buf: Vec<u8>, items: usize, pieces: &mut Vec<(Piece, Vec<u8>)>) -> Piece {
    let p = Piece {
        sum: checksum(&buf),
        len: buf.len(),
        items,
    };
    pieces.push((p, buf));
    p
}

/// A directory's snapshot as the pieces that hold it: those of `reuse`
/// whose entries are all as read, and new ones for the others.
fn entry_pieces(
    entries: &[Entry],
    reuse: Option<&Reuse>,
    pieces: &mut Vec<(Piece, Vec<u8>)>,
) -> Vec<Piece> {
    let read = reuse
        .filter(|r| r.dirty.is_sorted_by(|a, b| a < b))
        .map(|r| r.pieces);
    let (cuts, as_read) = cuts(entries.len(), read, ENTRIES_PER_PIECE);
    let mut dirty = reuse.map_or(&[][..], |r| r.dirty).iter().peekable();
    let mut out = Vec::with_capacity(cuts.len());
    for (k, cut) in cuts.into_iter().enumerate() {
        let mut touched = false;
        while dirty.next_if(|&&i| i < cut.end).is_some() {
            touched = true;
        }
        let encode = |entries: &[Entry]| {
            let mut w = Writer {
                buf: Vec::with_capacity(entries.len() * 72),
            };
            let mut prev = "";
            for e in entries {
                write_entry(&mut w, prev, e);
                prev = &e.path;
            }
            w.buf
        };
        match read.and_then(|r| r.get(k)) {
            Some(&p) if as_read && !touched => {
                // The tests build in debug: every piece named again is
                // checked against the encoding of what it holds.
                debug_assert_eq!(
                    checksum(&encode(&entries[cut])),
                    p.sum,
                    "a piece named again differs"
                );
                out.push(p);
            }
            _ => out.push(new_piece(encode(&entries[cut.clone()]), cut.len(), pieces)),
        }
    }
    out
}

/// The definition files' records as the pieces that hold them: those read
/// whose records are all as read, at the same places, and new ones for
/// the others. A stand-in for a record not read ([`Body::Unread`]) is
/// only ever in a piece named again; anywhere else, the record cannot be
/// written, and is not.
fn source_pieces(files: &Files, pieces: &mut Vec<(Piece, Vec<u8>)>) -> Result<Vec<FilePiece>> {
    let read: Vec<Piece> = files.pieces.iter().map(|p| p.piece).collect();
    let read = (!read.is_empty()).then_some(&read[..]);
    let (cuts, as_read) = cuts(files.sources.len(), read, SOURCES_PER_PIECE);
    let encode = |sources: &[SourceRecord]| {
        let size = sources
            .iter()
            .map(|s| s.body.as_ref().map_or(256, |b| b.len()) + 128)
            .sum();
        let mut w = Writer {
            buf: Vec::with_capacity(size),
        };
        for s in sources {
            write_source(&mut w, s);
        }
        w.buf
    };
    let mut out = Vec::with_capacity(cuts.len());
    for (k, cut) in cuts.into_iter().enumerate() {
        let sources = &files.sources[cut.clone()];
        let same = cut
            .clone()
            .zip(sources)
            .all(|(i, s)| s.body.is_some() && s.at == Some(i));
        match files.pieces.get(k) {
            Some(&p) if as_read && same => {
                // The tests build in debug: every piece named again that
                // was read is checked against the encoding of its records.
                debug_assert!(
                    sources.iter().any(|s| matches!(s.body, Some(Body::Unread)))
                        || checksum(&encode(sources)) == p.piece.sum,
                    "a piece named again differs"
                );
                out.push(p);
            }
            _ => {
                if sources.iter().any(|s| matches!(s.body, Some(Body::Unread))) {
                    return Err(Damaged);
                }
                let digest = digest(
                    sources
                        .iter()
                        .map(|s| (s.path.as_path(), s.hash.as_str(), s.warned)),
                );
                let piece = new_piece(encode(sources), cut.len(), pieces);
                out.push(FilePiece { piece, digest });
            }
        }
    }
    Ok(out)
}

fn read_section<'a>(r: &mut Reader<'a>) -> Result<&'a [u8]> {
    let bytes = r.bytes()?;
    let sum = r.fixed(8)?;
    if sum != checksum(bytes).to_le_bytes() {
        return Err(Damaged);
    }
    Ok(bytes)
}

/// A 64-bit checksum, so that a record damaged on disk (a flipped bit, a
/// torn write) is not believed: each step is a bijection of a lane's
/// state, and the lanes are folded in by bijective steps too, so any one
/// changed word changes the sum. Four lanes, independent of each other,
/// so that the processor overlaps their multiplications: every build
/// reads a record, and one of 1,000 jobs is 2 MB. Not a defence against
/// forgery (see "The build cache is trusted" in docs/output.md).
pub fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    fn step(h: u64, word: u64) -> u64 {
        let h = (h ^ word).wrapping_mul(K);
        h ^ h >> 29
    }
    let word = |c: &[u8]| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(w)
    };
    let seed = 0x2545_f491_4f6c_dd1d ^ bytes.len() as u64;
    let mut lanes = [seed, seed ^ 1, seed ^ 2, seed ^ 3];
    let mut blocks = bytes.chunks_exact(32);
    for b in &mut blocks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = step(*lane, word(&b[8 * i..8 * i + 8]));
        }
    }
    let mut h = lanes[0];
    for lane in &lanes[1..] {
        h = step(h, *lane);
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        h = step(h, word(w));
    }
    step(h, word(words.remainder()))
}

/// The format of a record; `None` when it is not one of ours, or damaged.
/// Records of format 5 and before are JSON.
pub fn format(bytes: &[u8]) -> Option<u32> {
    if bytes.first() == Some(&b'{') {
        #[derive(serde::Deserialize)]
        struct Json {
            format: u32,
        }
        return serde_json::from_slice::<Json>(bytes).ok().map(|j| j.format);
    }
    let rest = bytes.strip_prefix(MAGIC)?;
    Reader::new(rest).u32().ok()
}

/// The bytes of a piece, as `fetch` reads them, when they are the piece's
/// length and checksum: a piece that another record left, or that was
/// damaged, is not believed.
fn fetched(p: &Piece, fetch: &mut dyn FnMut(&Piece) -> Option<Vec<u8>>) -> Result<Vec<u8>> {
    let bytes = fetch(p).ok_or(Damaged)?;
    if bytes.len() != p.len || checksum(&bytes) != p.sum {
        return Err(Damaged);
    }
    Ok(bytes)
}

/// The record whose head is `head` (of the current format: see
/// [`format()`]), each directory's snapshot read from the pieces `fetch`
/// reads; the per-file part is left in its pieces ([`decode_piece`]).
pub fn decode(head: &[u8], fetch: &mut dyn FnMut(&Piece) -> Option<Vec<u8>>) -> Result<Record> {
    let mut r = Reader::new(head.strip_prefix(MAGIC).ok_or(Damaged)?);
    let format = r.u32()?;
    let mut main = Reader::new(read_section(&mut r)?);
    if !r.is_empty() {
        return Err(Damaged);
    }
    let key = main.string()?;
    let warned = main.bool()?;
    let contexts = serde_json::from_slice(main.bytes()?).map_err(|_| Damaged)?;
    let dests = main.list(|r| Ok((path(r)?, r.usize()?)))?;
    let mut pieces = Vec::new();
    let mut calm = Vec::new();
    let mut censuses = Vec::new();
    let outputs = main.list(|r| {
        let dir = path(r)?;
        let entries = match r.u8()? {
            0 => {
                pieces.push(None);
                calm.push(true);
                censuses.push(None);
                None
            }
            1 => {
                let list = read_pieces(r)?;
                // Read before the entries are counted: as many as the
                // bytes read allow, not as a head may claim.
                let bytes = list
                    .iter()
                    .map(|p| fetched(p, fetch))
                    .collect::<Result<Vec<_>>>()?;
                let mut entries = Vec::with_capacity(list.iter().map(|p| p.items).sum());
                let mut racy = false;
                for (p, bytes) in list.iter().zip(&bytes) {
                    racy |= read_entries(bytes, p.items, &mut entries)?;
                }
                pieces.push(Some(list));
                calm.push(!racy);
                let owned = r.usize()?;
                let bytes = r.u64()?;
                let foreign = r.list(|r| r.usize())?;
                // Indexes of the entries, in order, and no more of them
                // than there are.
                let ordered = foreign.windows(2).all(|w| w[0] < w[1])
                    && foreign.last().is_none_or(|&i| i < entries.len());
                if !ordered || owned.saturating_add(foreign.len()) > entries.len() {
                    return Err(Damaged);
                }
                censuses.push(Some(Census {
                    owned,
                    bytes,
                    foreign,
                }));
                Some(entries)
            }
            _ => return Err(Damaged),
        };
        Ok((dir, entries))
    })?;
    let read_files = match main.u8()? {
        0 => None,
        1 => Some(FilesRef {
            global: main.string()?,
            sums: main.list(|r| {
                Ok(PartSum {
                    docs: r.usize()?,
                    budget: r.u64()?,
                    namespaces: read_strs(r)?,
                })
            })?,
            pieces: main.list(|r| {
                Ok(FilePiece {
                    piece: read_piece(r)?,
                    digest: read_u64(r)?,
                })
            })?,
        }),
        _ => return Err(Damaged),
    };
    if !main.is_empty() {
        return Err(Damaged);
    }
    Ok(Record {
        format,
        key,
        warned,
        contexts,
        dests,
        outputs,
        pieces,
        calm,
        census: censuses,
        files: None,
        read_files,
    })
}

/// The records of the definition files in a piece of the per-file part,
/// from the bytes `fetch` reads, the first at place `first` in the list;
/// each file's parts are left undecoded ([`decode_parts`]): an
/// incremental build decodes only the files that changed. Their digest
/// must be the piece's.
pub fn decode_piece(
    p: &FilePiece,
    first: usize,
    fetch: &mut dyn FnMut(&Piece) -> Option<Vec<u8>>,
) -> Result<Vec<SourceRecord>> {
    let piece = std::sync::Arc::new(fetched(&p.piece, fetch)?);
    let mut r = Reader::new(&piece);
    let mut sources = Vec::with_capacity(p.piece.items);
    for i in 0..p.piece.items {
        let path = path(&mut r)?;
        let hash = read_hash(&mut r)?;
        let warned = r.bool()?;
        let body = r.bytes()?;
        let start = body.as_ptr() as usize - piece.as_ptr() as usize;
        sources.push(SourceRecord {
            path,
            hash,
            warned,
            parts: Vec::new(),
            body: Some(Body::Read {
                piece: std::sync::Arc::clone(&piece),
                range: start..start + body.len(),
            }),
            at: first.checked_add(i),
        });
    }
    let found = digest(
        sources
            .iter()
            .map(|s| (s.path.as_path(), s.hash.as_str(), s.warned)),
    );
    if !r.is_empty() || found != p.digest {
        return Err(Damaged);
    }
    Ok(sources)
}

fn path(r: &mut Reader) -> Result<PathBuf> {
    Ok(PathBuf::from(std::ffi::OsString::from_vec(
        r.bytes()?.to_vec(),
    )))
}

fn write_path(w: &mut Writer, p: &Path) {
    w.bytes(p.as_os_str().as_bytes());
}

/// A content hash: 16 bytes, with a flag for the hash of a foreign
/// file's head (`head:` in memory).
fn write_hash(w: &mut Writer, hash: &str) {
    let (head, hex) = match hash.strip_prefix("head:") {
        Some(hex) => (1, hex),
        None => (0, hash),
    };
    match unhex16(hex) {
        Some(raw) => {
            w.u8(head);
            w.fixed(&raw);
        }
        // Not a hash trainc makes: kept as it is, and never equal to one.
        None => {
            w.u8(2);
            w.str(hash);
        }
    }
}

fn read_hash(r: &mut Reader) -> Result<String> {
    let tag = r.u8()?;
    if tag == 2 {
        // Kept as text only when it is no hash trainc makes.
        let s = r.string()?;
        if unhex16(s.strip_prefix("head:").unwrap_or(&s)).is_some() {
            return Err(Damaged);
        }
        return Ok(s);
    }
    let raw = r.fixed(16)?;
    let hex = super::key::hex(raw);
    match tag {
        0 => Ok(hex),
        1 => Ok(format!("head:{hex}")),
        _ => Err(Damaged),
    }
}

/// A directory's snapshot as the record it was read from holds it, to be
/// named again by the next record but for the pieces whose entries
/// changed. After one edit of 1,000 jobs, 13 of 19,000 entries change.
pub struct Reuse<'a> {
    /// The pieces the snapshot was read from ([`Record`]'s `pieces`).
    pub pieces: &'a [Piece],
    /// The entries changed since, in order: their pieces are written
    /// again. Every other is the one read, at the same place in the list.
    pub dirty: &'a [usize],
}

/// One entry, its path written as what it adds to `prev`, the path of the
/// entry before it.
fn write_entry(w: &mut Writer, prev: &str, e: &Entry) {
    w.str_after(prev, &e.path);
    let kind = match e.kind {
        Kind::File => 0,
        Kind::Dir => 1,
        Kind::Symlink => 2,
        Kind::Other => 3,
    };
    match &e.file {
        None => w.u8(kind),
        Some(f) => {
            w.u8(kind | 4 | if f.racy { 8 } else { 0 });
            w.uint(u128::from(f.sig.ino));
            w.uint(u128::from(f.sig.size));
            w.uint(u128::from(f.sig.mode));
            w.int(f.sig.mtime);
            w.int(f.sig.ctime);
            write_hash(w, &f.hash);
        }
    }
}

/// The `n` entries of a snapshot's piece, after those of the pieces
/// before it in `out`; whether one is racy.
fn read_entries(bytes: &[u8], n: usize, out: &mut Vec<Entry>) -> Result<bool> {
    let mut racy = false;
    let mut r = Reader::new(bytes);
    let first = out.len();
    out.reserve(n);
    for _ in 0..n {
        let prev = match out.last() {
            Some(e) if out.len() > first => e.path.as_str(),
            _ => "",
        };
        let path = r.string_after(prev)?;
        let flags = r.u8()?;
        let kind = match flags & 3 {
            0 => Kind::File,
            1 => Kind::Dir,
            2 => Kind::Symlink,
            _ => Kind::Other,
        };
        let file = match flags >> 2 {
            // Every file trainc records has its signature and hash: one
            // without would be vouched for whatever it held.
            0 if kind == Kind::File => return Err(Damaged),
            0 => None,
            1 | 3 => Some(FileState {
                sig: Sig {
                    ino: r.u64()?,
                    size: r.u64()?,
                    mode: r.u32()?,
                    mtime: r.int()?,
                    ctime: r.int()?,
                },
                hash: read_hash(&mut r)?,
                racy: flags & 8 != 0,
            }),
            _ => return Err(Damaged),
        };
        racy |= flags & 8 != 0;
        out.push(Entry { path, kind, file });
    }
    if !r.is_empty() {
        return Err(Damaged);
    }
    Ok(racy)
}

fn write_strs(w: &mut Writer, items: &[String]) {
    w.usize(items.len());
    let mut prev = "";
    for s in items {
        w.str_after(prev, s);
        prev = s;
    }
}

fn read_strs(r: &mut Reader) -> Result<Vec<String>> {
    let n = r.count()?;
    let mut out: Vec<String> = Vec::with_capacity(n);
    for _ in 0..n {
        let s = r.string_after(out.last().map_or("", String::as_str))?;
        out.push(s);
    }
    Ok(out)
}

fn write_source(w: &mut Writer, s: &SourceRecord) {
    write_path(w, &s.path);
    write_hash(w, &s.hash);
    w.u8(u8::from(s.warned));
    // A record read and not decoded is written back as it was read.
    match &s.body {
        Some(body) => w.bytes(body),
        None => {
            let mut body = Writer::default();
            write_parts(&mut body, &s.parts);
            w.bytes(&body.buf);
        }
    }
}

/// What a definition file made for each set: its documents first, so that
/// [`scan_docs`] stops before the jobs' files.
fn write_parts(w: &mut Writer, parts: &[PartRecord]) {
    w.usize(parts.len());
    for part in parts {
        w.usize(part.docs.len());
        for d in &part.docs {
            w.str(&d.source);
            w.str(&d.namespace);
            w.str(&d.name);
            // In a block of its own: the checks across files skip the
            // claims of every unchanged file in one step when the edited
            // jobs claim what they claimed.
            let mut claims = Writer::default();
            claims.usize(d.claims.len());
            let mut prev = "";
            for (kind, namespace, name) in &d.claims {
                claims.str(kind);
                claims.opt_str(namespace.as_deref());
                claims.str_after(prev, name);
                prev = name;
            }
            w.bytes(&claims.buf);
            w.uint(u128::from(d.floor));
        }
        w.usize(part.jobs.len());
        for j in &part.jobs {
            w.str(&j.namespace);
            w.str(&j.name);
            write_strs(w, &j.images);
            write_strs(w, &j.files);
        }
        w.usize(part.builds.len());
        for b in &part.builds {
            for s in [&b.target, &b.source, &b.context, &b.path, &b.image] {
                w.str(s);
            }
        }
    }
}

/// The parts of a file's record, as [`write_parts`] wrote them.
pub fn decode_parts(body: &[u8]) -> Result<Vec<PartRecord>> {
    let mut r = Reader::new(body);
    let parts = r.list(|r| {
        Ok(PartRecord {
            docs: r.list(|r| {
                Ok(Summary {
                    source: r.string()?,
                    namespace: r.string()?,
                    name: r.string()?,
                    claims: {
                        let mut r = Reader::new(r.bytes()?);
                        let n = r.count()?;
                        let mut claims: Vec<(String, Option<String>, String)> =
                            Vec::with_capacity(n);
                        for _ in 0..n {
                            let kind = r.string()?;
                            let namespace = r.opt_string()?;
                            let prev = claims.last().map_or("", |c| c.2.as_str());
                            let name = r.string_after(prev)?;
                            claims.push((kind, namespace, name));
                        }
                        if !r.is_empty() {
                            return Err(Damaged);
                        }
                        claims
                    },
                    floor: r.u64()?,
                })
            })?,
            jobs: r.list(|r| {
                Ok(JobRecord {
                    namespace: r.string()?,
                    name: r.string()?,
                    images: read_strs(r)?,
                    files: read_strs(r)?,
                })
            })?,
            builds: r.list(|r| {
                Ok(BuildRecord {
                    target: r.string()?,
                    source: r.string()?,
                    context: r.string()?,
                    path: r.string()?,
                    image: r.string()?,
                })
            })?,
        })
    })?;
    if !r.is_empty() {
        return Err(Damaged);
    }
    Ok(parts)
}

/// The number of parts of an undecoded body.
pub fn count_parts(body: &[u8]) -> Result<usize> {
    Reader::new(body).usize()
}

/// One document of an undecoded body, as [`scan_docs`] shows it.
pub struct DocView<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub floor: u64,
}

/// Calls `doc` for each document of part `k` of an undecoded body, and,
/// with `claims`, `claim(kind, namespace, name)` for each object it claims,
/// allocating nothing per document: the checks across files look at every
/// unchanged file's documents, and most builds change one file. Stops, and
/// says so, when either returns `true`.
pub fn scan_docs(
    body: &[u8],
    k: usize,
    claims: bool,
    mut doc: impl FnMut(&DocView) -> bool,
    mut claim: impl FnMut(&str, Option<&str>, &str) -> bool,
) -> Result<bool> {
    let mut r = Reader::new(body);
    let parts = r.count()?;
    if k >= parts {
        return Err(Damaged);
    }
    let mut name = Vec::new();
    for part in 0..=k {
        let docs = r.count()?;
        for _ in 0..docs {
            r.bytes()?;
            let namespace = r.str()?;
            let doc_name = r.str()?;
            let block = r.bytes()?;
            let mut hit = false;
            name.clear();
            if part == k && claims {
                let mut r = Reader::new(block);
                for _ in 0..r.count()? {
                    let kind = r.str()?;
                    let namespace = match r.u8()? {
                        0 => None,
                        1 => Some(r.str()?),
                        _ => return Err(Damaged),
                    };
                    let shared = r.usize()?;
                    if shared > name.len() {
                        return Err(Damaged);
                    }
                    name.truncate(shared);
                    name.extend_from_slice(r.bytes()?);
                    if !hit {
                        let n = std::str::from_utf8(&name).map_err(|_| Damaged)?;
                        hit = claim(kind, namespace, n);
                    }
                }
                if !r.is_empty() {
                    return Err(Damaged);
                }
            }
            let floor = r.u64()?;
            if part == k
                && (hit
                    || doc(&DocView {
                        namespace,
                        name: doc_name,
                        floor,
                    }))
            {
                return Ok(true);
            }
        }
        if part == k {
            break;
        }
        // The jobs and builds of a part before `k`, skipped.
        for _ in 0..r.count()? {
            r.bytes()?;
            r.bytes()?;
            skip_strs(&mut r)?;
            skip_strs(&mut r)?;
        }
        for _ in 0..r.count()? {
            for _ in 0..5 {
                r.bytes()?;
            }
        }
    }
    Ok(false)
}

fn skip_strs(r: &mut Reader) -> Result<()> {
    for _ in 0..r.count()? {
        r.usize()?;
        r.bytes()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_strings_round_trip() {
        let mut w = Writer::default();
        let ints = [0u128, 1, 127, 128, 300, u64::MAX as u128, u128::MAX];
        for n in ints {
            w.uint(n);
        }
        let signed = [0i128, -1, 1, i64::MIN as i128, i128::MIN, i128::MAX];
        for n in signed {
            w.int(n);
        }
        w.str("ml/job-00000/a.yaml");
        w.str_after("ml/job-00000/a.yaml", "ml/job-00000/b.yaml");
        w.opt_str(None);
        w.opt_str(Some("x"));
        let mut r = Reader::new(&w.buf);
        for n in ints {
            assert_eq!(r.uint(), Ok(n));
        }
        for n in signed {
            assert_eq!(r.int(), Ok(n));
        }
        let prev = r.string().unwrap();
        assert_eq!(r.string_after(&prev).unwrap(), "ml/job-00000/b.yaml");
        assert_eq!(r.opt_string(), Ok(None));
        assert_eq!(r.opt_string(), Ok(Some("x".into())));
        assert!(r.is_empty());
        assert_eq!(r.u8(), Err(Damaged));
    }

    /// Integers of up to nine bytes are read in 64 bits, longer ones in 128:
    /// both read what the writer wrote, on either side of the seam, and
    /// refuse a padded encoding.
    #[test]
    fn integers_read_alike_on_both_sides_of_nine_bytes() {
        for k in 0..128 {
            let p = 1u128 << k;
            for n in [p - 1, p, p | 1, p.wrapping_add(p - 1)] {
                let mut w = Writer::default();
                w.uint(n);
                w.u8(0xaa);
                let mut r = Reader::new(&w.buf);
                assert_eq!(r.uint(), Ok(n), "{n}");
                assert_eq!(r.u8(), Ok(0xaa), "{n}: read too far");
            }
        }
        for len in [2, 9, 10] {
            let mut padded = vec![0x80u8; len - 1];
            padded.push(0);
            assert_eq!(Reader::new(&padded).uint(), Err(Damaged), "{len}");
            assert_eq!(Reader::new(&padded[..len - 1]).uint(), Err(Damaged));
        }
    }

    /// Forged lengths, counts, prefixes and integers are errors, not
    /// panics or huge allocations.
    #[test]
    fn forged_fields_are_errors() {
        let mut w = Writer::default();
        w.uint(u128::from(u64::MAX));
        assert_eq!(Reader::new(&w.buf).count(), Err(Damaged));
        assert_eq!(Reader::new(&w.buf).bytes(), Err(Damaged));
        assert_eq!(Reader::new(&[0xff; 20]).uint(), Err(Damaged));
        // 2^128 does not fit.
        let mut too_big = vec![0x80u8; 18];
        too_big.push(0x04);
        assert_eq!(Reader::new(&too_big).uint(), Err(Damaged));
        assert_eq!(
            Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x10]).u32(),
            Err(Damaged)
        );
        // A shared prefix longer than the string before it.
        let mut w = Writer::default();
        w.usize(5);
        w.str("x");
        assert_eq!(Reader::new(&w.buf).string_after("abc"), Err(Damaged));
        // A prefix that splits a character.
        let mut w = Writer::default();
        w.usize(1);
        w.str("x");
        assert_eq!(Reader::new(&w.buf).string_after("é"), Err(Damaged));
        assert_eq!(Reader::new(&[2]).bool(), Err(Damaged));
    }

    /// A value is read only in the encoding the writer gives it, so that
    /// the bytes of what was read are the bytes of writing it again
    /// ([`Reuse`] copies them): a longer integer, a shorter shared prefix
    /// or a hash kept as text are a record that is not ours.
    #[test]
    fn only_the_writers_encoding_is_read() {
        assert_eq!(Reader::new(&[0]).uint(), Ok(0));
        assert_eq!(Reader::new(&[0x80, 0x01]).uint(), Ok(128));
        assert_eq!(Reader::new(&[0x80, 0x00]).uint(), Err(Damaged));
        assert_eq!(Reader::new(&[0x81, 0x80, 0x00]).u64(), Err(Damaged));
        let after = |shared: usize, tail: &str| {
            let mut w = Writer::default();
            w.usize(shared);
            w.str(tail);
            Reader::new(&w.buf).string_after("ml/job-1/a.yaml")
        };
        assert_eq!(after(9, "b.yaml"), Ok("ml/job-1/b.yaml".into()));
        assert_eq!(after(8, "/b.yaml"), Err(Damaged));
        assert_eq!(after(0, "ml/job-1/b.yaml"), Err(Damaged));
        assert_eq!(after(15, ""), Ok("ml/job-1/a.yaml".into()));
        let h = "00112233445566778899aabbccddeeff";
        for (hash, ok) in [
            (h.to_owned(), false),
            (format!("head:{h}"), false),
            ("head:xyz".to_owned(), true),
            (h.to_uppercase(), true),
        ] {
            let mut w = Writer::default();
            w.u8(2);
            w.str(&hash);
            assert_eq!(read_hash(&mut Reader::new(&w.buf)).is_ok(), ok, "{hash}");
            let mut w = Writer::default();
            write_hash(&mut w, &hash);
            assert_eq!(read_hash(&mut Reader::new(&w.buf)), Ok(hash));
        }
        // A file with no signature or hash.
        let mut w = Writer::default();
        w.str_after("", "a.yaml");
        w.u8(0);
        assert_eq!(read_entries(&w.buf, 1, &mut Vec::new()), Err(Damaged));
        for n in [0, 1, 127, 128, 300, u128::from(u64::MAX), u128::MAX] {
            let mut w = Writer::default();
            w.uint(n);
            assert_eq!(Reader::new(&w.buf).uint(), Ok(n));
        }
    }

    /// A piece whose entry says what it says in another encoding than
    /// the writer's (here a path that shares less of the one before it)
    /// is damaged, not read: named again, it would not be the piece its
    /// entries encode to.
    #[test]
    fn a_piece_in_another_encoding_is_damaged() {
        let r = record();
        let entries = r.outputs[0].1.as_ref().unwrap();
        assert_eq!(entries[2].path, "ml/a");
        let piece = |shared_less: bool| {
            let mut w = Writer::default();
            let mut prev = "";
            for (i, e) in entries.iter().enumerate() {
                write_entry(&mut w, if shared_less && i == 2 { "" } else { prev }, e);
                prev = &e.path;
            }
            w.buf
        };
        let mut out = Vec::new();
        assert_eq!(
            read_entries(&piece(false), entries.len(), &mut out),
            Ok(true),
            "one is racy"
        );
        assert_eq!(&out, entries);
        assert_eq!(
            read_entries(&piece(true), entries.len(), &mut Vec::new()),
            Err(Damaged)
        );
        // Neither fewer nor more entries than the head says.
        for n in [entries.len() - 1, entries.len() + 1] {
            assert_eq!(
                read_entries(&piece(false), n, &mut Vec::new()),
                Err(Damaged)
            );
        }
    }

    #[test]
    fn hex_digits() {
        assert_eq!(unhex16("0123456789abcdef0123456789abcdeF"), None);
        assert_eq!(unhex16("00"), None);
        assert_eq!(
            unhex16("000102030405060708090a0b0c0d0e0f"),
            Some(std::array::from_fn(|i| i as u8))
        );
    }

    fn record() -> Record {
        let sig = |ino| Sig {
            ino,
            size: 120,
            mode: 0o100644,
            mtime: 1_795_589_120_991_395_454,
            ctime: -5,
        };
        let file = |path: &str, ino, hash: &str, racy| Entry {
            path: path.into(),
            kind: Kind::File,
            file: Some(FileState {
                sig: sig(ino),
                hash: hash.into(),
                racy,
            }),
        };
        let dir = |path: &str| Entry {
            path: path.into(),
            kind: Kind::Dir,
            file: None,
        };
        let h = "00112233445566778899aabbccddeeff";
        Record {
            format: super::super::FORMAT,
            key: "k".into(),
            warned: true,
            contexts: Vec::new(),
            dests: vec![("/p/deploy".into(), 3)],
            outputs: vec![
                (
                    "/p/deploy".into(),
                    Some(vec![
                        file("kustomization.yaml", 1, h, false),
                        dir("ml"),
                        dir("ml/a"),
                        file("ml/a/job-a.yaml", 2, h, true),
                        file("ml/a/notes.yaml", 3, &format!("head:{h}"), false),
                        Entry {
                            path: "ml/link".into(),
                            kind: Kind::Symlink,
                            file: None,
                        },
                    ]),
                ),
                ("/p/build".into(), None),
            ],
            pieces: Vec::new(),
            calm: Vec::new(),
            census: Vec::new(),
            read_files: None,
            files: Some(Files {
                global: "g".into(),
                sources: vec![SourceRecord {
                    path: "/p/jobs/a.yaml".into(),
                    hash: h.into(),
                    warned: true,
                    parts: vec![PartRecord {
                        docs: vec![Summary {
                            source: "jobs/a.yaml".into(),
                            namespace: "ml".into(),
                            name: "a".into(),
                            claims: vec![
                                ("Job".into(), Some("ml".into()), "a-worker-0".into()),
                                ("PersistentVolume".into(), None, "ml-a-data".into()),
                            ],
                            floor: 4188,
                        }],
                        jobs: vec![JobRecord {
                            namespace: "ml".into(),
                            name: "a".into(),
                            images: vec!["r/x:1".into()],
                            files: vec!["ml/a/job-a.yaml".into(), "ml/a/kustomization.yaml".into()],
                        }],
                        builds: vec![BuildRecord {
                            target: "ml-a".into(),
                            source: "jobs/a.yaml".into(),
                            context: "build/ml/a".into(),
                            path: "ml/a/x.Dockerfile".into(),
                            image: "r/x:1".into(),
                        }],
                    }],
                    body: None,
                    at: None,
                }],
                pieces: Vec::new(),
                sums: vec![PartSum {
                    docs: 1,
                    budget: 4188,
                    namespaces: vec!["ml".into()],
                }],
            }),
        }
    }

    /// [`write()`] with nothing reused.
    fn encode(record: &Record) -> Encoded {
        write(record, &[]).unwrap()
    }

    /// The pieces of `e`, by checksum, as a records directory holds them.
    fn store(e: &Encoded) -> std::collections::HashMap<u64, Vec<u8>> {
        e.pieces.iter().map(|(p, b)| (p.sum, b.clone())).collect()
    }

    fn read_back(head: &[u8], store: &std::collections::HashMap<u64, Vec<u8>>) -> Result<Record> {
        let mut fetch = |p: &Piece| store.get(&p.sum).cloned();
        let mut r = decode(head, &mut fetch)?;
        if let Some(f) = r.read_files.take() {
            let mut sources = Vec::new();
            for p in &f.pieces {
                sources.extend(decode_piece(p, sources.len(), &mut fetch)?);
            }
            r.files = Some(Files {
                global: f.global,
                sources,
                pieces: f.pieces,
                sums: f.sums,
            });
        }
        Ok(r)
    }

    fn entries(n: u64) -> Vec<Entry> {
        (0..n)
            .map(|i| Entry {
                path: format!("ml/job-{:04}/file-{}.yaml", i / 7, i % 7),
                kind: Kind::File,
                file: Some(FileState {
                    sig: Sig {
                        ino: 1000 + i,
                        size: 4000 + i,
                        mode: 0o100644,
                        mtime: 1_795_589_120_991_395_454 + i128::from(i),
                        ctime: 1_795_589_120_991_395_454,
                    },
                    hash: format!("{:032x}", u128::from(i) * 0x9e37_79b9),
                    racy: i % 5 == 0,
                }),
            })
            .collect()
    }

    /// A record written from the one it was read names again the pieces
    /// none of whose entries changed, writes only the others, and its head
    /// is byte for byte that of the record encoded whole: whichever
    /// entries changed, the first, the last, runs of them or none.
    #[test]
    fn pieces_are_written_only_where_entries_changed() {
        let mut r = record();
        let n = 2 * ENTRIES_PER_PIECE + 300;
        r.outputs
            .insert(0, ("/p/other".into(), Some(entries(n as u64))));
        let first = encode(&r);
        let mut disk = store(&first);
        let read = read_back(&first.head, &disk).unwrap();
        assert_eq!(read.pieces.len(), read.outputs.len());
        assert!(read.pieces[2].is_none());
        let pieces = read.pieces[0].clone().unwrap();
        assert_eq!(pieces.len(), 3);
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % m as u64) as usize
        };
        let mut cases: Vec<Vec<usize>> = vec![vec![], vec![0], vec![n - 1], (0..n).collect()];
        for _ in 0..30 {
            let mut d: Vec<usize> = (0..next(6)).map(|_| next(n)).collect();
            d.sort_unstable();
            d.dedup();
            cases.push(d);
        }
        for dirty in cases {
            let mut outputs = read.outputs.clone();
            let entries = outputs[0].1.as_mut().unwrap();
            for &i in &dirty {
                let f = entries[i].file.as_mut().unwrap();
                f.sig.size += 1;
                f.racy = !f.racy;
                f.hash = format!("{:032x}", i + 7);
            }
            let edited = Record {
                outputs,
                pieces: Vec::new(),
                files: None,
                read_files: None,
                ..record()
            };
            let reuse = [Some(Reuse {
                pieces: &pieces,
                dirty: &dirty,
            })];
            let out = write(&edited, &reuse).unwrap();
            let whole = encode(&edited);
            assert_eq!(out.head, whole.head, "dirty {dirty:?}");
            let touched: std::collections::BTreeSet<usize> =
                dirty.iter().map(|i| i / ENTRIES_PER_PIECE).collect();
            // The other directory, without reuse, is written whole.
            assert_eq!(out.pieces.len(), touched.len() + 1, "dirty {dirty:?}");
            disk.extend(store(&out));
            let back = read_back(&out.head, &disk).unwrap();
            assert_eq!(back.outputs, edited.outputs);
        }
        // Pieces that do not hold the entries, or changes not in order,
        // are not used: everything is written.
        let entries = read.outputs[0].1.as_deref().unwrap();
        let whole = Record {
            outputs: vec![("/p/other".into(), Some(entries.to_vec()))],
            pieces: Vec::new(),
            files: None,
            read_files: None,
            ..record()
        };
        for (pieces, dirty) in [
            (&pieces[1..], &[][..]),
            (&pieces[..], &[5, 2][..]),
            (&pieces[..], &[3, 3][..]),
        ] {
            let out = write(&whole, &[Some(Reuse { pieces, dirty })]).unwrap();
            assert_eq!(out.head, encode(&whole).head);
            assert_eq!(out.pieces.len(), 3);
        }
    }

    /// The definition files' records, read and written back, are named
    /// again but for the pieces that hold one compiled again, or one that
    /// moved.
    #[test]
    fn pieces_of_unchanged_files_are_named_again() {
        let mut r = record();
        let one = r.files.as_ref().unwrap().sources[0].clone();
        let n = 2 * SOURCES_PER_PIECE + 10;
        r.files.as_mut().unwrap().sources = (0..n)
            .map(|i| SourceRecord {
                path: format!("/p/jobs/{i:03}.yaml").into(),
                ..one.clone()
            })
            .collect();
        let first = encode(&r);
        let disk = store(&first);
        let read = read_back(&first.head, &disk).unwrap();
        let files = read.files.as_ref().unwrap();
        assert_eq!(files.pieces.len(), 3);
        assert!(
            files
                .sources
                .iter()
                .enumerate()
                .all(|(i, s)| s.at == Some(i))
        );
        let again = |f: &dyn Fn(&mut Vec<SourceRecord>)| {
            let mut back = Record {
                pieces: Vec::new(),
                ..read_back(&first.head, &disk).unwrap()
            };
            f(&mut back.files.as_mut().unwrap().sources);
            let out = write(&back, &[]).unwrap();
            (out.head == first.head, out.pieces.len())
        };
        // The directory, without reuse, is written whole.
        assert_eq!(again(&|_| {}), (true, 1));
        // Compiled again: its record decoded, its piece written anew.
        assert_eq!(
            again(&|s| {
                let s = &mut s[SOURCES_PER_PIECE + 3];
                s.parts = decode_parts(&s.body.take().unwrap()).unwrap();
                s.at = None;
            }),
            (true, 2)
        );
        // Two records that swapped places, in two pieces.
        assert_eq!(again(&|s| s.swap(0, SOURCES_PER_PIECE)), (false, 3));
        // Stand-ins for the records of a piece not read name it again; one
        // anywhere else cannot be written.
        let unread = |s: &mut Vec<SourceRecord>| {
            for (i, s) in s.iter_mut().enumerate().skip(SOURCES_PER_PIECE) {
                *s = SourceRecord::stand_in(i);
            }
        };
        assert_eq!(again(&unread), (true, 1));
        let mut back = Record {
            pieces: Vec::new(),
            ..read_back(&first.head, &disk).unwrap()
        };
        let sources = &mut back.files.as_mut().unwrap().sources;
        unread(sources);
        sources.swap(0, 2 * SOURCES_PER_PIECE);
        assert!(write(&back, &[]).is_err());
        // The digest of a piece is of its files as a build finds them
        // unchanged: each path and hash, without warnings.
        let files = read.files.as_ref().unwrap();
        let found = files.sources[..SOURCES_PER_PIECE]
            .iter()
            .map(|s| (s.path.as_path(), s.hash.as_str(), false));
        assert_ne!(
            digest(found),
            files.pieces[0].digest,
            "the records had warnings"
        );
        let mut unwarned = Record {
            files: r.files.clone(),
            ..record()
        };
        for s in &mut unwarned.files.as_mut().unwrap().sources {
            s.warned = false;
        }
        let e = encode(&unwarned);
        let back = read_back(&e.head, &store(&e)).unwrap();
        let files = back.files.as_ref().unwrap();
        let found = files.sources[..SOURCES_PER_PIECE]
            .iter()
            .map(|s| (s.path.as_path(), s.hash.as_str(), false));
        assert_eq!(digest(found), files.pieces[0].digest);
        // A piece whose records are not of the digest its head gives is
        // damaged.
        let mut wrong = files.pieces[1];
        wrong.digest ^= 1;
        let mut fetch = |p: &Piece| store(&e).get(&p.sum).cloned();
        assert_eq!(
            decode_piece(&wrong, SOURCES_PER_PIECE, &mut fetch).err(),
            Some(Damaged)
        );
        assert!(decode_piece(&files.pieces[1], SOURCES_PER_PIECE, &mut fetch).is_ok());
    }

    #[test]
    fn a_record_round_trips() {
        let mut r = record();
        let first = encode(&r);
        assert_eq!(format(&first.head), Some(r.format));
        let disk = store(&first);
        let mut back = read_back(&first.head, &disk).unwrap();
        // Each file's parts are decoded when asked for, and an undecoded
        // body is written back as it was read, in the pieces read.
        assert!(back.warned);
        let again = encode(&back);
        assert_eq!(again.head, first.head);
        assert_eq!(again.pieces.len(), 1, "the snapshot, not reused");
        for s in &mut back.files.as_mut().unwrap().sources {
            s.parts = decode_parts(&s.body.take().unwrap()).unwrap();
            s.at = None;
        }
        // The pieces of each directory's entries.
        assert_eq!(back.pieces.len(), 2);
        assert_eq!(back.pieces[0].as_ref().map(|p| p[0].items), Some(6));
        assert_eq!(back.pieces[1], None);
        assert_eq!(back.calm, [false, true], "a racy entry, and no snapshot");
        // The census counted as it was written: two of trainc's files, and
        // the foreign file's head and the symlink.
        let census = back.census[0].clone().unwrap();
        assert_eq!(
            (census.owned, census.bytes, &census.foreign[..]),
            (2, 240, &[4, 5][..])
        );
        assert_eq!(back.census[1], None);
        // A census of entries that are not there, or out of order, is a
        // record that is not ours.
        for foreign in [vec![4, 9], vec![5, 4]] {
            let forged = Record {
                census: vec![Some(Census {
                    owned: 2,
                    bytes: 240,
                    foreign,
                })],
                ..record()
            };
            let e = encode(&forged);
            assert_eq!(read_back(&e.head, &store(&e)).err(), Some(Damaged));
        }
        back.pieces = Vec::new();
        back.calm = Vec::new();
        back.census = Vec::new();
        back.files.as_mut().unwrap().pieces = Vec::new();
        assert_eq!(format!("{back:?}"), format!("{r:?}"));
        r.files = None;
        let e = encode(&r);
        let back = read_back(&e.head, &store(&e)).unwrap();
        assert!(back.files.is_none());
        assert_eq!(back.outputs, r.outputs);
        // Older records are JSON: another version's, or damaged.
        assert_eq!(format(br#"{"format": 5, "key": "x"}"#), Some(5));
        assert_eq!(format(b"{not json"), None);
        assert_eq!(format(b"trainc"), None);
    }

    /// The documents of an undecoded body, read in place, are the decoded
    /// ones; claims are shown only when asked for.
    #[test]
    fn documents_are_read_in_place() {
        let r = record();
        let source = &r.files.as_ref().unwrap().sources[0];
        let mut w = Writer::default();
        write_parts(&mut w, &source.parts);
        let body = w.buf;
        let mut docs = Vec::new();
        let mut claims = Vec::new();
        let hit = scan_docs(
            &body,
            0,
            true,
            |d| {
                docs.push((d.namespace.to_owned(), d.name.to_owned(), d.floor));
                false
            },
            |kind, namespace, name| {
                claims.push((
                    kind.to_owned(),
                    namespace.map(str::to_owned),
                    name.to_owned(),
                ));
                false
            },
        );
        assert_eq!(hit, Ok(false));
        let want = &source.parts[0].docs[0];
        assert_eq!(
            docs,
            [(want.namespace.clone(), want.name.clone(), want.floor)]
        );
        assert_eq!(claims, want.claims);
        let hit = scan_docs(
            &body,
            0,
            false,
            |_| false,
            |_, _, _| panic!("not asked for"),
        );
        assert_eq!(hit, Ok(false));
        assert_eq!(
            scan_docs(&body, 0, true, |_| false, |_, _, n| n == "ml-a-data"),
            Ok(true)
        );
        assert_eq!(
            scan_docs(&body, 1, true, |_| false, |_, _, _| false),
            Err(Damaged)
        );
        // It reads the documents and stops: a body cut short is an error
        // until the documents are whole, never a panic.
        let scan = |len: usize| scan_docs(&body[..len], 0, true, |_| false, |_, _, _| false);
        let whole = (0..=body.len()).find(|&len| scan(len).is_ok()).unwrap();
        assert!(whole < body.len(), "the jobs' files are not read");
        assert!((whole..=body.len()).all(|len| scan(len) == Ok(false)));
    }

    /// A record whose head or piece is cut short anywhere, or has any one
    /// bit flipped, or whose piece is missing, is rejected (or read as
    /// another format), never believed, never a panic.
    #[test]
    fn a_damaged_record_is_rejected() {
        let e = encode(&record());
        let disk = store(&e);
        let read = |head: &[u8], disk: &std::collections::HashMap<u64, Vec<u8>>| -> Result<()> {
            if format(head) != Some(super::super::FORMAT) {
                return Err(Damaged);
            }
            let r = read_back(head, disk)?;
            for s in r.files.map(|f| f.sources).unwrap_or_default() {
                decode_parts(s.body.as_deref().ok_or(Damaged)?)?;
            }
            Ok(())
        };
        assert_eq!(read(&e.head, &disk), Ok(()));
        let damaged = |bytes: &[u8], each: &mut dyn FnMut(Vec<u8>, String)| {
            for len in 0..bytes.len() {
                each(bytes[..len].to_vec(), format!("cut at {len}"));
            }
            let mut longer = bytes.to_vec();
            longer.push(0);
            each(longer, "longer".into());
            for i in 0..bytes.len() {
                for bit in 0..8 {
                    let mut b = bytes.to_vec();
                    b[i] ^= 1 << bit;
                    each(b, format!("bit {bit} of byte {i}"));
                }
            }
        };
        damaged(&e.head, &mut |head, what| {
            assert_eq!(read(&head, &disk), Err(Damaged), "head: {what}");
        });
        assert_eq!(e.pieces.len(), 2);
        for (p, bytes) in &e.pieces {
            damaged(bytes, &mut |b, what| {
                let mut disk = disk.clone();
                disk.insert(p.sum, b);
                assert_eq!(read(&e.head, &disk), Err(Damaged), "piece: {what}");
            });
            let mut disk = disk.clone();
            disk.remove(&p.sum);
            assert_eq!(read(&e.head, &disk), Err(Damaged), "piece missing");
        }
    }
}
