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

    pub fn uint(&mut self, mut n: u128) {
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

    pub fn uint(&mut self) -> Result<u128> {
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

    /// A string written by [`Writer::str_after`] `prev`.
    pub fn string_after(&mut self, prev: &str) -> Result<String> {
        let shared = self.usize()?;
        let head = prev.as_bytes().get(..shared).ok_or(Damaged)?;
        let tail = self.bytes()?;
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
    let b = s.as_bytes();
    if b.len() != 32 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = digit(b[2 * i])? << 4 | digit(b[2 * i + 1])?;
    }
    Some(out)
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
        assert_eq!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x10]).u32(), Err(Damaged));
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
        assert_eq!(unhex16("0123456789abcdef0123456789abcdeF"), None);
        assert_eq!(unhex16("00"), None);
        assert_eq!(
            unhex16("000102030405060708090a0b0c0d0e0f"),
            Some(std::array::from_fn(|i| i as u8))
        );
    }
}
