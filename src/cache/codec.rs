//! The byte encoding of build-cache records: length-prefixed fields and
//! LEB128 integers, no field names, paths of a snapshot stored as the
//! bytes they add to the path before them.
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
use super::snapshot::{Entry, FileState, Kind, Sig};
use crate::pipeline::Summary;

/// How every record starts; the format number follows. A record of
/// format 5 or older is JSON, and starts with `{`.
pub const MAGIC: &[u8] = b"trainc build record\n";

/// [`write`] into a buffer.
#[cfg(test)]
pub fn encode(record: &Record, files: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = write(record, files, &[], &mut out);
    out
}

/// Writes a record's bytes to `out`: the magic, the format, then two
/// sections: what a no-op build reads (the key, contexts and snapshots),
/// and the per-definition-file part only an incremental build reads: the
/// record's, or `files` as [`decode`] left it. A section is its length, its
/// bytes, and their [`checksum`]; each is written as it was built, not
/// copied into one buffer (a record of 1,000 jobs is 2 MB).
pub fn write(
    record: &Record,
    files: Option<&[u8]>,
    reuse: &[Option<Reuse>],
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let entries: usize = record
        .outputs
        .iter()
        .flat_map(|(_, e)| e)
        .map(Vec::len)
        .sum();
    // Most entries take 40-70 bytes: one allocation, no copies as it grows.
    let mut main = Writer {
        buf: Vec::with_capacity(entries * 72 + 4096),
    };
    main.str(&record.key);
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
                match reuse.get(i).and_then(Option::as_ref) {
                    Some(r) => r.write(&mut main, entries),
                    None => write_entries(&mut main, entries),
                }
            }
        }
    }
    let built;
    let files = match files {
        Some(raw) => raw,
        None => {
            let mut w = Writer::default();
            match &record.files {
                None => w.u8(0),
                Some(f) => {
                    let size = f
                        .sources
                        .iter()
                        .map(|s| s.body.as_ref().map_or(256, Vec::len) + 128)
                        .sum();
                    w.buf.reserve(size);
                    w.u8(1);
                    write_files(&mut w, f);
                }
            }
            built = w.buf;
            &built
        }
    };
    let mut head = Writer::default();
    head.fixed(MAGIC);
    head.uint(u128::from(record.format));
    head.usize(main.buf.len());
    out.write_all(&head.buf)?;
    out.write_all(&main.buf)?;
    let mut mid = Writer::default();
    mid.fixed(&checksum(&main.buf).to_le_bytes());
    mid.usize(files.len());
    out.write_all(&mid.buf)?;
    out.write_all(files)?;
    out.write_all(&checksum(files).to_le_bytes())
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

/// The record in `bytes` (of the current format: see [`format()`]), but
/// for the per-file part, returned undecoded (see [`decode_files`]).
pub fn decode(bytes: &[u8]) -> Result<(Record, &[u8])> {
    let mut r = Reader::new(bytes.strip_prefix(MAGIC).ok_or(Damaged)?);
    let format = r.u32()?;
    let section = read_section(&mut r)?;
    let mut main = Reader::new(section);
    let files = read_section(&mut r)?;
    if !r.is_empty() {
        return Err(Damaged);
    }
    // Where `main` is in `bytes`: entries are located in the record itself.
    let origin = section.as_ptr() as usize - bytes.as_ptr() as usize + section.len();
    let key = main.string()?;
    let contexts = serde_json::from_slice(main.bytes()?).map_err(|_| Damaged)?;
    let dests = main.list(|r| Ok((path(r)?, r.usize()?)))?;
    let mut spans = Vec::new();
    let outputs = main.list(|r| {
        let dir = path(r)?;
        let entries = match r.u8()? {
            0 => {
                spans.push(None);
                None
            }
            1 => {
                let mut at = Vec::new();
                let entries = read_entries(r, |r| at.push(origin - r.buf.len()))?;
                spans.push(Some(at));
                Some(entries)
            }
            _ => return Err(Damaged),
        };
        Ok((dir, entries))
    })?;
    if !main.is_empty() {
        return Err(Damaged);
    }
    let record = Record {
        format,
        key,
        contexts,
        dests,
        outputs,
        spans,
        files: None,
    };
    Ok((record, files))
}

/// The per-file part of a record, as [`decode`] left it.
pub fn decode_files(bytes: &[u8]) -> Result<Option<Files>> {
    let mut r = Reader::new(bytes);
    let files = match r.u8()? {
        0 => None,
        1 => Some(read_files(&mut r)?),
        _ => return Err(Damaged),
    };
    if !r.is_empty() {
        return Err(Damaged);
    }
    Ok(files)
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
/// copied into the next record but for the entries that changed. After
/// one edit of 1,000 jobs, 13 of 19,000 entries change; encoding them all
/// again was nearly half of what the edit cost above a no-op build, and it
/// grew with the output, not with the edit.
pub struct Reuse<'a> {
    /// The record the snapshot was read from.
    pub bytes: &'a [u8],
    /// Where [`decode`] found each entry ([`Record`]'s `spans`): entry `i`
    /// is `bytes[at[i]..at[i + 1]]`.
    pub at: &'a [usize],
    /// The entries changed since, in order: encoded again. Every other is
    /// the one read, at the same place in the list, after the same path;
    /// [`decode`] takes each value only in the one encoding [`write()`]
    /// gives it, so its bytes are what encoding it again would write.
    pub dirty: &'a [usize],
}

impl Reuse<'_> {
    /// `entries` as [`write_entries`] writes them, copying what is clean.
    fn write(&self, w: &mut Writer, entries: &[Entry]) {
        let start = w.buf.len();
        let fits = self.at.len() == entries.len() + 1
            && self.at.is_sorted()
            && self.at.last().is_some_and(|&end| end <= self.bytes.len())
            && self.dirty.is_sorted_by(|a, b| a < b)
            && self.dirty.last().is_none_or(|&i| i < entries.len());
        if !fits {
            return write_entries(w, entries);
        }
        w.usize(entries.len());
        let mut from = 0;
        for &i in self.dirty {
            w.fixed(&self.bytes[self.at[from]..self.at[i]]);
            let prev = i.checked_sub(1).map_or("", |p| entries[p].path.as_str());
            write_entry(w, prev, &entries[i]);
            from = i + 1;
        }
        w.fixed(&self.bytes[self.at[from]..self.at[entries.len()]]);
        // The tests build in debug: every record they write this way is
        // checked against the whole encoding.
        if cfg!(debug_assertions) {
            let mut whole = Writer::default();
            write_entries(&mut whole, entries);
            debug_assert!(w.buf[start..] == whole.buf[..], "a reused snapshot differs");
        }
    }
}

fn write_entries(w: &mut Writer, entries: &[Entry]) {
    w.usize(entries.len());
    let mut prev = "";
    for e in entries {
        write_entry(w, prev, e);
        prev = &e.path;
    }
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

/// The entries of a snapshot; `mark` is called before each and after the
/// last, to say where they lie.
fn read_entries(r: &mut Reader, mut mark: impl FnMut(&Reader)) -> Result<Vec<Entry>> {
    let n = r.count()?;
    let mut out: Vec<Entry> = Vec::with_capacity(n);
    for _ in 0..n {
        mark(r);
        let path = r.string_after(out.last().map_or("", |e| e.path.as_str()))?;
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
                hash: read_hash(r)?,
                racy: flags & 8 != 0,
            }),
            _ => return Err(Damaged),
        };
        out.push(Entry { path, kind, file });
    }
    mark(r);
    Ok(out)
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

fn write_files(w: &mut Writer, files: &Files) {
    w.str(&files.global);
    w.usize(files.sources.len());
    for s in &files.sources {
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

/// The per-file part, each file's parts left undecoded ([`decode_parts`]):
/// an incremental build decodes only the files that changed.
fn read_files(r: &mut Reader) -> Result<Files> {
    let global = r.string()?;
    let sources = r.list(|r| {
        Ok(SourceRecord {
            path: path(r)?,
            hash: read_hash(r)?,
            warned: r.bool()?,
            parts: Vec::new(),
            body: Some(r.bytes()?.to_vec()),
        })
    })?;
    Ok(Files { global, sources })
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
        w.usize(1);
        w.str_after("", "a.yaml");
        w.u8(0);
        assert_eq!(read_entries(&mut Reader::new(&w.buf), |_| {}), Err(Damaged));
        for n in [0, 1, 127, 128, 300, u128::from(u64::MAX), u128::MAX] {
            let mut w = Writer::default();
            w.uint(n);
            assert_eq!(Reader::new(&w.buf).uint(), Ok(n));
        }
    }

    /// A record whose entry says what it says in another encoding than
    /// the writer's (here a path that shares less of the one before it)
    /// is damaged, not read: written back with its entries copied, it
    /// would not be the record encoded whole.
    #[test]
    fn a_record_in_another_encoding_is_damaged() {
        let bytes = encode(&record(), None);
        let (read, _) = decode(&bytes).unwrap();
        let at = read.spans[0].as_ref().unwrap();
        let entries = read.outputs[0].1.as_ref().unwrap();
        assert_eq!(entries[2].path, "ml/a");
        let mut r = Reader::new(&bytes[at[2]..]);
        r.string_after(&entries[1].path).unwrap();
        let path_end = bytes.len() - r.buf.len();
        let mut r = Reader::new(bytes.strip_prefix(MAGIC).unwrap());
        let format = r.u32().unwrap();
        let main = r.bytes().unwrap();
        let start = main.as_ptr() as usize - bytes.as_ptr() as usize;
        let files = &bytes[start + main.len() + 8..];
        let mut forged = Writer::default();
        forged.fixed(&bytes[start..at[2]]);
        forged.usize(0);
        forged.str("ml/a");
        forged.fixed(&bytes[path_end..start + main.len()]);
        let mut w = Writer::default();
        w.fixed(MAGIC);
        w.uint(u128::from(format));
        w.bytes(&forged.buf);
        w.fixed(&checksum(&forged.buf).to_le_bytes());
        w.fixed(files);
        assert_eq!(decode(&w.buf).err(), Some(Damaged));
        // The same splice with the writer's encoding is the record.
        let mut same = Writer::default();
        same.fixed(&bytes[start..at[2]]);
        same.str_after(&entries[1].path, "ml/a");
        same.fixed(&bytes[path_end..start + main.len()]);
        assert_eq!(same.buf, main);
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
            spans: Vec::new(),
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
                }],
            }),
        }
    }

    /// A record written from the one it was read, its unchanged entries
    /// copied, is byte for byte the record encoded whole: whichever
    /// entries changed, the first, the last, runs of them or none.
    #[test]
    fn reused_entries_are_the_whole_encoding() {
        let mut r = record();
        let many: Vec<Entry> = (0..300u64)
            .map(|i| Entry {
                path: format!("ml/job-{:03}/file-{}.yaml", i / 7, i % 7),
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
            .collect();
        r.outputs.insert(0, ("/p/other".into(), Some(many)));
        let bytes = encode(&r, None);
        let (read, _) = decode(&bytes).unwrap();
        assert_eq!(read.spans.len(), read.outputs.len());
        assert!(read.spans[2].is_none());
        let n = r.outputs[0].1.as_ref().unwrap().len();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % m as u64) as usize
        };
        let mut cases: Vec<Vec<usize>> = vec![vec![], vec![0], vec![n - 1], (0..n).collect()];
        for _ in 0..50 {
            let mut d: Vec<usize> = (0..next(12)).map(|_| next(n)).collect();
            d.sort_unstable();
            d.dedup();
            cases.push(d);
        }
        for dirty in cases {
            let mut now = read.outputs.clone();
            let entries = now[0].1.as_mut().unwrap();
            for &i in &dirty {
                let f = entries[i].file.as_mut().unwrap();
                f.sig.size += 1;
                f.racy = !f.racy;
                f.hash = format!("{:032x}", i + 7);
            }
            let mut then = read.outputs.clone();
            std::mem::swap(&mut then, &mut now);
            let write = Record {
                outputs: then,
                spans: Vec::new(),
                files: None,
                ..record()
            };
            let reuse: Vec<Option<Reuse>> = read
                .spans
                .iter()
                .map(|at| {
                    Some(Reuse {
                        bytes: &bytes,
                        at: at.as_deref()?,
                        dirty: &dirty,
                    })
                })
                .collect();
            let mut out = Vec::new();
            write_record(&write, &reuse, &mut out);
            assert_eq!(out, encode(&write, None), "dirty {dirty:?}");
        }
        // Spans that do not fit the entries are not used.
        let entries = read.outputs[0].1.as_deref().unwrap();
        let at = read.spans[0].as_deref().unwrap();
        for (at, dirty) in [
            (&at[1..], &[][..]),
            (at, &[3, 3][..]),
            (at, &[5, 2][..]),
            (at, &[n][..]),
        ] {
            let mut w = Writer::default();
            Reuse {
                bytes: &bytes,
                at,
                dirty,
            }
            .write(&mut w, entries);
            let mut whole = Writer::default();
            write_entries(&mut whole, entries);
            assert_eq!(w.buf, whole.buf);
        }
    }

    fn write_record(record: &Record, reuse: &[Option<Reuse>], out: &mut Vec<u8>) {
        write(record, None, reuse, out).unwrap();
    }

    #[test]
    fn a_record_round_trips() {
        let mut r = record();
        let bytes = encode(&r, None);
        assert_eq!(format(&bytes), Some(r.format));
        let (mut back, files) = decode(&bytes).unwrap();
        back.files = decode_files(files).unwrap();
        // Each file's parts are decoded when asked for, and an undecoded
        // body is written back as it was read.
        let again = encode(&back, None);
        assert_eq!(again, bytes);
        for s in &mut back.files.as_mut().unwrap().sources {
            s.parts = decode_parts(&s.body.take().unwrap()).unwrap();
        }
        // Where the entries lie: one span per entry, and the end.
        assert_eq!(back.spans.len(), 2);
        assert_eq!(back.spans[0].as_ref().map(Vec::len), Some(7));
        assert_eq!(back.spans[1], None);
        back.spans = Vec::new();
        assert_eq!(format!("{back:?}"), format!("{r:?}"));
        r.files = None;
        let bytes = encode(&r, None);
        let (back, files) = decode(&bytes).unwrap();
        assert!(decode_files(files).unwrap().is_none());
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

    /// A record cut short anywhere, or with any one bit flipped, is
    /// rejected (or read as another format), never believed, never a panic.
    #[test]
    fn a_damaged_record_is_rejected() {
        let bytes = encode(&record(), None);
        let read = |b: &[u8]| -> Result<()> {
            if format(b) != Some(super::super::FORMAT) {
                return Err(Damaged);
            }
            let (_, files) = decode(b)?;
            for s in decode_files(files)?.map(|f| f.sources).unwrap_or_default() {
                decode_parts(s.body.as_deref().ok_or(Damaged)?)?;
            }
            Ok(())
        };
        assert_eq!(read(&bytes), Ok(()));
        for len in 0..bytes.len() {
            assert_eq!(read(&bytes[..len]), Err(Damaged), "cut at {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(read(&longer), Err(Damaged));
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert_eq!(read(&b), Err(Damaged), "bit {bit} of byte {i}");
            }
        }
    }
}
