//! The line scanner's fast path, for the compact shape DFTracer writes: the line is
//! checked as JSON with whole-word bit operations (one bit per byte) instead of a walk
//! over its tokens, and the fields aggregation needs are then picked out by jumping from
//! key to key through those bits.
//!
//! It takes only lines that are objects of non-empty objects (at most [`MAX_FAST_DEPTH`]
//! deep) of strings and integers, all ASCII, with no escapes, no whitespace, no arrays,
//! no `true`/`false`/`null`, no fractions, no kept integer over 18 digits, and at most
//! [`MAX_FAST_LINE`] bytes. On such a line every byte outside a string is one of
//! `{}:,-0123456789`, and the line is valid JSON exactly when each of those bytes may
//! follow the byte before it (checked on 64 bytes at once, `check_word`) and the braces
//! balance, closing at the last byte. Anything else is declined (`false`), and the
//! strict scanner (`scan`) reads the line, deciding and wording every error; so a line
//! either gets the fields the strict scanner would give it or goes to the strict
//! scanner. Tests check the two agree on every committed trace line, every cut and
//! one-byte change of a sample of them, and generated lines, for each compiled variant.
//!
//! The bytes are classified with AVX-512BW, AVX2 or SSE2, whichever the CPU has (found
//! once at run time); each variant is the whole path compiled for its instruction set.
//! Only on x86_64: classified byte by byte the path is slower than the strict scanner.

use std::borrow::Cow;

use crate::event::{Number, RawEvent, Val};

/// The longest line the fast path takes: 1024 bytes (its bit masks live on the stack).
/// DFTracer events are 150-400 bytes; longer lines go to the strict scanner.
pub const MAX_FAST_LINE: usize = 1024;

/// The deepest nesting the fast path takes: the event object and the objects in it.
pub(crate) const MAX_FAST_DEPTH: u32 = 2;

/// The most braces a line the fast path takes may hold (an event with `args` has four).
const MAX_BRACES: usize = 16;

const WORDS: usize = MAX_FAST_LINE / 64;

/// The bytes that open and close a JSON object, which the masks mark and the parser checks.
const OPEN_BRACE: u8 = b'{';
const CLOSE_BRACE: u8 = b'}';

/// Where one 64-byte block holds each kind of byte, one bit per byte.
#[derive(Clone, Copy, Default)]
struct Block {
    quote: u64,
    /// Bit i set when an odd number of the block's quotes are at or before byte i.
    quote_prefix: u64,
    open: u64,
    close: u64,
    colon: u64,
    comma: u64,
    digit: u64,
    minus: u64,
    /// A control byte, a byte at or above 0x80, or a backslash.
    unusual: u64,
}

/// The widest vector instructions this CPU has, detected once (std caches the answer).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Simd {
    Avx512,
    Avx2,
    Sse2,
}

#[cfg(target_arch = "x86_64")]
impl Simd {
    /// The answer, found on the first call and then read from a static (one load per
    /// line instead of five feature tests).
    #[inline]
    fn detect() -> Simd {
        static FOUND: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
        *FOUND.get_or_init(|| {
            let bmi = is_x86_feature_detected!("bmi1") && is_x86_feature_detected!("bmi2");
            let bmi = bmi && is_x86_feature_detected!("pclmulqdq");
            if bmi && is_x86_feature_detected!("avx512bw") {
                Simd::Avx512
            } else if bmi && is_x86_feature_detected!("avx2") {
                Simd::Avx2
            } else {
                Simd::Sse2
            }
        })
    }
}

/// Fills `ev` from `line` and returns true when the line has the fast path's shape;
/// false (with `ev` in any state) when the strict scanner must read it.
#[cfg(target_arch = "x86_64")]
pub fn scan_fast<'a>(line: &'a [u8], ev: &mut RawEvent<'a>) -> bool {
    match Simd::detect() {
        // SAFETY: `detect` found avx512bw, bmi1, bmi2 and pclmulqdq on this CPU.
        Simd::Avx512 => unsafe { scan_avx512(line, ev) },
        // SAFETY: `detect` found avx2, bmi1, bmi2 and pclmulqdq on this CPU.
        Simd::Avx2 => unsafe { scan_avx2(line, ev) },
        // SAFETY: SSE2 is part of the x86_64 baseline: every x86_64 CPU has it.
        Simd::Sse2 => unsafe { scan_sse2(line, ev) },
    }
}

/// The fast path compiled for AVX-512BW (and BMI, for bit scans without branches).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,bmi1,bmi2,popcnt,pclmulqdq")]
fn scan_avx512<'a>(line: &'a [u8], ev: &mut RawEvent<'a>) -> bool {
    scan_with(line, ev, |b| classify_avx512(b))
}

/// The fast path compiled for AVX2 (and BMI).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,pclmulqdq")]
fn scan_avx2<'a>(line: &'a [u8], ev: &mut RawEvent<'a>) -> bool {
    scan_with(line, ev, |b| classify_avx2(b))
}

/// The fast path with SSE2 only.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn scan_sse2<'a>(line: &'a [u8], ev: &mut RawEvent<'a>) -> bool {
    scan_with(line, ev, |b| classify_sse2(b))
}

/// The fast path compiled for one instruction set by name (`avx512`, `avx2`, `sse2`,
/// or `bytes` for the byte-by-byte classifier), for the tests and benchmarks that check
/// each against the strict scanner; `None` when this CPU lacks it. Not a stable API.
pub fn scan_fast_as<'a>(variant: &str, line: &'a [u8], ev: &mut RawEvent<'a>) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        let simd = Simd::detect();
        match variant {
            // SAFETY: `detect` found avx512bw, bmi1, bmi2 and pclmulqdq on this CPU.
            "avx512" if matches!(simd, Simd::Avx512) => Some(unsafe { scan_avx512(line, ev) }),
            // SAFETY: `detect` found bmi1, bmi2 and pclmulqdq (it answers Sse2 without
            // them), and avx2 is checked here.
            "avx2" if !matches!(simd, Simd::Sse2) && is_x86_feature_detected!("avx2") => {
                Some(unsafe { scan_avx2(line, ev) })
            }
            // SAFETY: SSE2 is part of the x86_64 baseline: every x86_64 CPU has it.
            "sse2" => Some(unsafe { scan_sse2(line, ev) }),
            "bytes" => Some(scan_with(line, ev, classify_bytes)),
            _ => None,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    (variant == "bytes").then(|| scan_with(line, ev, classify_bytes))
}

/// Elsewhere than x86_64 every line goes to the strict scanner: classified byte by byte
/// (`scan_fast_as("bytes")`), the fast path is ~3x slower than the strict scanner
/// (`benches/dftracer/RESULTS.md`).
#[cfg(not(target_arch = "x86_64"))]
pub fn scan_fast<'a>(_line: &'a [u8], _ev: &mut RawEvent<'a>) -> bool {
    false
}

/// The fast path around a block classifier; inlined into each compiled variant.
#[inline(always)]
fn scan_with<'a>(
    line: &'a [u8],
    ev: &mut RawEvent<'a>,
    classify: impl Fn(&[u8; 64]) -> Block,
) -> bool {
    // Filled in place: returning the masks by value copied ~450 bytes a line, and
    // zeroing braces stored as (position, bool) pairs took 32 narrow stores (together
    // ~16% of the fast path's time, perf).
    let mut m = Masks {
        words: 0,
        quote: [0; WORDS],
        key: [0; WORDS],
        digit: [0; WORDS],
        braces: [0; MAX_BRACES],
        opens: 0,
        n_braces: 0,
    };
    if !validate(line, classify, &mut m) {
        return false;
    }
    // SAFETY: `validate` accepted the line, so no byte of it is at or above 0x80 (each
    // such byte sets a bit of `unusual`, and any set bit declines the line): the line is
    // ASCII, hence UTF-8, and so is every slice of it. Checking it again with
    // `str::from_utf8` cost 2.3% of a whole summary run (perf, RESULTS.md).
    let text = unsafe { std::str::from_utf8_unchecked(line) };
    extract(text, &m, ev)
}

/// All 64 bytes at once with AVX-512BW: one compare into a bit mask per kind of byte.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,pclmulqdq")]
fn classify_avx512(block: &[u8; 64]) -> Block {
    use std::arch::x86_64::*;
    // SAFETY: reads the 64 bytes of `block` (an unaligned load).
    let v = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
    let eq = |c: u8| _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(c as i8));
    let digit = _mm512_cmple_epu8_mask(
        _mm512_sub_epi8(v, _mm512_set1_epi8(b'0' as i8)),
        _mm512_set1_epi8(9),
    );
    let quote = eq(b'"');
    Block {
        quote,
        quote_prefix: prefix_xor_clmul(quote),
        open: eq(OPEN_BRACE),
        close: eq(CLOSE_BRACE),
        colon: eq(b':'),
        comma: eq(b','),
        digit,
        minus: eq(b'-'),
        // Signed compare: bytes at or above 0x80 are negative, so below 0x20 too.
        unusual: _mm512_cmplt_epi8_mask(v, _mm512_set1_epi8(0x20)) | eq(b'\\'),
    }
}

/// 32 bytes at a time with AVX2: a compare and a `movemask` per kind of byte.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,pclmulqdq")]
fn classify_avx2(block: &[u8; 64]) -> Block {
    use std::arch::x86_64::*;
    let mut b = Block::default();
    for k in 0..2 {
        // SAFETY: reads bytes 32k..32k+32 of the 64 of `block` (an unaligned load).
        let v = unsafe { _mm256_loadu_si256(block[32 * k..].as_ptr().cast()) };
        let bits = |m: __m256i| u64::from(_mm256_movemask_epi8(m) as u32) << (32 * k);
        let eq = |c: u8| bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8)));
        b.quote |= eq(b'"');
        b.open |= eq(OPEN_BRACE);
        b.close |= eq(CLOSE_BRACE);
        b.colon |= eq(b':');
        b.comma |= eq(b',');
        b.minus |= eq(b'-');
        b.unusual |= eq(b'\\');
        let d = _mm256_sub_epi8(v, _mm256_set1_epi8(b'0' as i8));
        b.digit |= bits(_mm256_cmpeq_epi8(
            _mm256_min_epu8(d, _mm256_set1_epi8(9)),
            d,
        ));
        b.unusual |= bits(_mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), v));
    }
    b.quote_prefix = prefix_xor_clmul(b.quote);
    b
}

/// [`prefix_xor`] in one carry-less multiply by all ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq")]
fn prefix_xor_clmul(x: u64) -> u64 {
    use std::arch::x86_64::*;
    let product = _mm_clmulepi64_si128(_mm_cvtsi64_si128(x as i64), _mm_set1_epi8(-1), 0);
    _mm_cvtsi128_si64(product) as u64
}

/// 16 bytes at a time with SSE2: a compare and a `movemask` per kind of byte.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn classify_sse2(block: &[u8; 64]) -> Block {
    use std::arch::x86_64::*;
    let mut b = Block::default();
    let eq = |v: __m128i, c: u8| _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8)));
    for k in 0..4 {
        // SAFETY: reads bytes 16k..16k+16 of the 64 of `block` (an unaligned load).
        let v = unsafe { _mm_loadu_si128(block[16 * k..].as_ptr().cast()) };
        let bits = |m: i32| u64::from(m as u16) << (16 * k);
        b.quote |= bits(eq(v, b'"'));
        b.open |= bits(eq(v, OPEN_BRACE));
        b.close |= bits(eq(v, CLOSE_BRACE));
        b.colon |= bits(eq(v, b':'));
        b.comma |= bits(eq(v, b','));
        b.minus |= bits(eq(v, b'-'));
        let digit = _mm_and_si128(
            _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)),
            _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)),
        );
        b.digit |= bits(_mm_movemask_epi8(digit));
        // Signed compare: bytes at or above 0x80 are negative, so below 0x20 too.
        let low = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
        b.unusual |= bits(_mm_movemask_epi8(_mm_or_si128(
            low,
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
        )));
    }
    b.quote_prefix = prefix_xor(b.quote);
    b
}

/// Classifies a 64-byte block, byte by byte: only for the tests (`scan_fast_as`), which
/// check the grammar logic with it on any CPU.
fn classify_bytes(block: &[u8; 64]) -> Block {
    let mut b = Block::default();
    for (i, &c) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match c {
            b'"' => b.quote |= bit,
            OPEN_BRACE => b.open |= bit,
            CLOSE_BRACE => b.close |= bit,
            b':' => b.colon |= bit,
            b',' => b.comma |= bit,
            b'-' => b.minus |= bit,
            b'0'..=b'9' => b.digit |= bit,
            b'\\' | 0..0x20 | 0x80.. => b.unusual |= bit,
            _ => {}
        }
    }
    b.quote_prefix = prefix_xor(b.quote);
    b
}

impl Block {
    /// The masks moved `by` (1..64) bytes down.
    #[inline(always)]
    fn shifted(self, by: usize) -> Block {
        // The prefix of the moved quotes: the old one moved, flipped where the bits moved
        // out held an odd number of quotes.
        let odd_before = (self.quote_prefix >> (by - 1)) & 1;
        Block {
            quote: self.quote >> by,
            quote_prefix: (self.quote_prefix >> by) ^ (0u64.wrapping_sub(odd_before) >> by),
            open: self.open >> by,
            close: self.close >> by,
            colon: self.colon >> by,
            comma: self.comma >> by,
            digit: self.digit >> by,
            minus: self.minus >> by,
            unusual: self.unusual >> by,
        }
    }
}

/// Bit i set when an odd number of bits at or below i are set in `x`.
#[inline(always)]
fn prefix_xor(mut x: u64) -> u64 {
    for s in [1, 2, 4, 8, 16, 32] {
        x ^= x << s;
    }
    x
}

/// What the walk over the line's keys needs, one word per 64 bytes.
struct Masks {
    words: usize,
    /// Every `"` of the line.
    quote: [u64; WORDS],
    /// The opening quote of every key.
    key: [u64; WORDS],
    digit: [u64; WORDS],
    /// Positions of the braces outside strings, in order.
    braces: [u16; MAX_BRACES],
    /// Bit k set when brace k opens.
    opens: u16,
    n_braces: usize,
}

/// Carries between words: the previous word's masks the next word looks back on (only
/// their top bits matter).
#[derive(Default)]
struct Carry {
    in_string: bool,
    open_comma: u64,
    colon: u64,
    key_close: u64,
    /// A value's closing quote, a digit or `}`: what may come before `,` and `}`.
    value_end: u64,
    digit: u64,
    minus: u64,
    /// The carry out of the key-close addition.
    add: bool,
}

/// `m` moved one byte on: bit i set when byte i - 1 is in `m` (`top` is the previous
/// word's `m`).
#[inline(always)]
fn after(m: u64, top: u64) -> u64 {
    (m << 1) | (top >> 63)
}

/// What the grammar check makes of one word: the bits that break the grammar, the
/// opening quotes of keys, and the braces outside strings.
struct Word {
    bad: u64,
    key: u64,
    open: u64,
    close: u64,
}

/// Checks one word of the line (`valid` masks the bytes inside the line). Each byte
/// outside a string is checked against the byte before it, which checks every pair of
/// neighbours once; empty objects are declined, so `}` always follows a value.
#[inline(always)]
fn check_word(b: &Block, valid: u64, first: bool, c: &mut Carry) -> Word {
    let in_string = b.quote_prefix ^ if c.in_string { !0 } else { 0 };
    c.in_string = in_string >> 63 != 0;
    let outside = !(in_string | b.quote) & valid;
    let (open, close) = (b.open & outside, b.close & outside);
    let (colon, comma) = (b.colon & outside, b.comma & outside);
    let (digit, minus) = (b.digit & outside, b.minus & outside);
    let opening = b.quote & in_string;
    let closing = b.quote & !in_string & valid;
    let after_open_comma = after(open | comma, c.open_comma);
    let after_colon = after(colon, c.colon);
    let key = opening & after_open_comma;
    // Adding a key's opening-quote bit to its run of in-string bits carries through the
    // run onto the byte after it: the key's closing quote.
    let (sum, c1) = in_string.overflowing_add(key);
    let (sum, c2) = sum.overflowing_add(u64::from(c.add));
    c.add = c1 | c2;
    let key_close = sum & !in_string & closing;
    let value_end = (closing & !key_close) | digit | close;
    let after_value = after(value_end, c.value_end);
    let after_number = after(digit | minus, c.digit | c.minus);
    let start = u64::from(first);
    let bad = (outside & !(open | close | colon | comma | digit | minus))
        | (opening & !(after_open_comma | after_colon))
        | ((close | comma) & !after_value)
        | (colon & !after(key_close, c.key_close))
        | (digit & !(after_colon | after_number))
        | (minus & !after_colon)
        | (open & !(after_colon | start));
    (c.open_comma, c.colon, c.key_close) = (open | comma, colon, key_close);
    (c.value_end, c.digit, c.minus) = (value_end, digit, minus);
    Word {
        bad,
        key,
        open,
        close,
    }
}

/// Fills `m` (all zero) with the masks of `line`; true when the line is valid JSON of
/// the fast path's shape.
#[inline(always)]
fn validate(line: &[u8], classify: impl Fn(&[u8; 64]) -> Block, m: &mut Masks) -> bool {
    if line.len() > MAX_FAST_LINE || line.first() != Some(&OPEN_BRACE) {
        return false;
    }
    let words = line.len().div_ceil(64);
    m.words = words;
    let mut carry = Carry::default();
    let (mut bad, mut unusual) = (0u64, 0u64);
    for w in 0..words {
        let start = 64 * w;
        let block = match line.get(start..start + 64) {
            Some(full) => classify(full.try_into().expect("64 bytes")),
            // The tail: the line's last 64 bytes, the bits of bytes before `start` shifted
            // out (no copy, so no store-to-load stall).
            None if line.len() >= 64 => {
                classify(line[line.len() - 64..].try_into().expect("64 bytes"))
                    .shifted(64 - (line.len() - start))
            }
            None => {
                // A line shorter than a block, padded with spaces (no kind of byte the
                // masks mark).
                let mut pad = [b' '; 64];
                pad[..line.len()].copy_from_slice(line);
                classify(&pad)
            }
        };
        let valid = if line.len() - start >= 64 {
            !0
        } else {
            (1u64 << (line.len() - start)) - 1
        };
        unusual |= block.unusual;
        let word = check_word(&block, valid, w == 0, &mut carry);
        bad |= word.bad;
        m.quote[w] = block.quote;
        m.key[w] = word.key;
        m.digit[w] = block.digit;
        if !push_braces(m, &word, w) {
            return false;
        }
    }
    bad == 0 && unusual == 0 && braces_balance(m, line.len())
}

/// Records the braces of word `w` (outside strings); false when there are too many.
#[inline(always)]
fn push_braces(m: &mut Masks, word: &Word, w: usize) -> bool {
    let mut bits = word.open | word.close;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if m.n_braces == MAX_BRACES {
            return false;
        }
        // Positions fit: a line is at most MAX_FAST_LINE bytes.
        m.braces[m.n_braces] = (64 * w + i) as u16;
        m.opens |= ((word.open >> i & 1) as u16) << m.n_braces;
        m.n_braces += 1;
    }
    true
}

/// Whether the braces open and close in order, no deeper than [`MAX_FAST_DEPTH`], and
/// the first closes the line at its last byte.
#[inline(always)]
fn braces_balance(m: &Masks, len: usize) -> bool {
    let mut depth = 0u32;
    for (k, &pos) in m.braces[..m.n_braces].iter().enumerate() {
        if m.opens >> k & 1 != 0 {
            depth += 1;
            if depth > MAX_FAST_DEPTH {
                return false;
            }
        } else {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return k + 1 == m.n_braces && usize::from(pos) + 1 == len;
            }
        }
    }
    false
}

/// The first set bit of `words` at or after `from`.
#[inline(always)]
fn next_set(words: &[u64], from: usize) -> Option<usize> {
    let mut w = from / 64;
    let mut bits = *words.get(w)? & (!0u64 << (from % 64));
    while bits == 0 {
        w += 1;
        bits = *words.get(w)?;
    }
    Some(64 * w + bits.trailing_zeros() as usize)
}

/// The first clear bit of `words` at or after `from` (`words.len() * 64` when none).
#[inline(always)]
fn next_clear(words: &[u64], from: usize) -> usize {
    let mut w = from / 64;
    let Some(&first) = words.get(w) else {
        return from;
    };
    let mut bits = !first & (!0u64 << (from % 64));
    while bits == 0 {
        w += 1;
        match words.get(w) {
            Some(&x) => bits = !x,
            None => return 64 * w,
        }
    }
    64 * w + bits.trailing_zeros() as usize
}

/// Walks the keys of a validated line, keeping what the strict scanner keeps: `name`,
/// `cat`, `ph`, `ts`, `dur` of the event and `epoch`, `name`, `value` of its `args`
/// object (the last of each when repeated).
#[inline(always)]
fn extract<'a>(text: &'a str, m: &Masks, ev: &mut RawEvent<'a>) -> bool {
    let line = text.as_bytes();
    let (mut brace, mut depth) = (0usize, 0u32);
    // Where the object the key is in opens, when it is nested, and where `args` opens.
    let (mut nested, mut args) = (usize::MAX, None);
    for (w, &word) in m.key[..m.words].iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let p = 64 * w + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            while let Some(&pos) = m.braces[..m.n_braces].get(brace) {
                if usize::from(pos) > p {
                    break;
                }
                if m.opens >> brace & 1 != 0 {
                    depth += 1;
                    if depth == 2 {
                        nested = usize::from(pos);
                    }
                } else {
                    depth -= 1;
                }
                brace += 1;
            }
            let (field, len) = field_at(line, m, p, depth == 1);
            let v = p + len + 3;
            let slot = match field {
                Field::Skip => continue,
                Field::Args => {
                    args = (line[v] == OPEN_BRACE).then_some(v);
                    continue;
                }
                _ if depth == 2 && args != Some(nested) => continue,
                Field::Name => &mut ev.name,
                Field::Cat => &mut ev.cat,
                Field::Ph => &mut ev.ph,
                Field::Ts => &mut ev.ts,
                Field::Dur => &mut ev.dur,
                Field::Epoch => &mut ev.epoch,
                Field::ArgName => &mut ev.arg_name,
                Field::ArgValue => &mut ev.arg_value,
            };
            if !value(text, m, v, slot) {
                return false;
            }
        }
    }
    true
}

/// Which kept field a key names (for the event's own keys or those of an object in it).
#[derive(Clone, Copy)]
enum Field {
    Name,
    Cat,
    Ph,
    Ts,
    Dur,
    Args,
    Epoch,
    ArgName,
    ArgValue,
    Skip,
}

/// The little-endian word of up to eight bytes.
const fn tag(s: &[u8]) -> u64 {
    let mut w = 0u64;
    let mut i = s.len();
    while i > 0 {
        i -= 1;
        w = (w << 8) | s[i] as u64;
    }
    w
}

/// The field the key whose opening quote is at `p` names, and the key's length (only
/// meaningful for a kept field). A key is told by the word of bytes after its opening
/// quote, closing quote included, masked to the key's length: no length is computed and
/// no byte compared one by one.
#[inline(always)]
fn field_at(line: &[u8], m: &Masks, p: usize, top: bool) -> (Field, usize) {
    let Some(bytes) = line.get(p + 1..p + 9) else {
        // Within eight bytes of the end (`{"a":1}`): the key's own bytes.
        let end = next_set(&m.quote[..m.words], p + 1).unwrap_or(p + 1);
        let key = &line[p + 1..end];
        let mut padded = [0u8; 8];
        padded[..key.len().min(7)].copy_from_slice(&key[..key.len().min(7)]);
        padded[key.len().min(7)] = b'"';
        return field_of(u64::from_le_bytes(padded), top);
    };
    field_of(u64::from_le_bytes(bytes.try_into().expect("8 bytes")), top)
}

/// [`field_at`] on the word after the opening quote.
#[inline(always)]
fn field_of(k: u64, top: bool) -> (Field, usize) {
    const MASK: [u64; 7] = [
        0,
        0,
        0,
        0xff_ffff,
        0xffff_ffff,
        0xff_ffff_ffff,
        0xffff_ffff_ffff,
    ];
    // One branch on the key's first byte, then one masked compare: most skipped keys
    // (`id`, `pid`, `hhash`, `fhash`, ...) are told apart by that byte alone.
    let is = |field: Field, name: &[u8]| {
        let n = name.len();
        if k & MASK[n] == tag(name) {
            (field, n - 1)
        } else {
            (Field::Skip, 0)
        }
    };
    match (top, k as u8) {
        (true, b'n') => is(Field::Name, b"name\""),
        (true, b'c') => is(Field::Cat, b"cat\""),
        (true, b'p') => is(Field::Ph, b"ph\""),
        (true, b't') => is(Field::Ts, b"ts\""),
        (true, b'd') => is(Field::Dur, b"dur\""),
        (true, b'a') => is(Field::Args, b"args\""),
        (false, b'e') => is(Field::Epoch, b"epoch\""),
        (false, b'n') => is(Field::ArgName, b"name\""),
        (false, b'v') => is(Field::ArgValue, b"value\""),
        _ => (Field::Skip, 0),
    }
}

/// Reads the value at `v` into `slot` as the strict scanner does: a string, an
/// integer, or an object as `Other`; false for an integer over 18 digits.
#[inline(always)]
fn value<'a>(text: &'a str, m: &Masks, v: usize, slot: &mut Option<Val<'a>>) -> bool {
    let line = text.as_bytes();
    *slot = Some(match line[v] {
        b'"' => {
            let Some(end) = next_set(&m.quote[..m.words], v + 1) else {
                return false;
            };
            match text.get(v + 1..end) {
                Some(s) => Val::Str(Cow::Borrowed(s)),
                None => return false,
            }
        }
        OPEN_BRACE => Val::Other,
        first => {
            let neg = first == b'-';
            let start = v + usize::from(neg);
            let end = next_clear(&m.digit[..m.words], start).min(line.len());
            if end - start > 18 {
                return false;
            }
            let x = digits_value(line, start, end);
            Val::Num(Number::Int(if neg { -x } else { x }))
        }
    });
    true
}

/// Up to 18 ASCII digits as an integer. Eight at a time when the line has a whole word
/// before each eight: SWAR pairs, quads and halves instead of a multiply per digit.
#[inline(always)]
fn digits_value(line: &[u8], start: usize, end: usize) -> i64 {
    let n = end - start;
    if n <= 8 && end >= 8 {
        return eight_digits(line, end, n) as i64;
    }
    if n <= 16 && end >= 16 {
        let hi = eight_digits(line, end - 8, n - 8);
        return (hi * 100_000_000 + eight_digits(line, end, 8)) as i64;
    }
    line[start..end]
        .iter()
        .fold(0i64, |v, &d| v * 10 + i64::from(d - b'0'))
}

/// The value of the last `n` (1..=8) digits before `end` (`end >= 8`).
#[inline(always)]
fn eight_digits(line: &[u8], end: usize, n: usize) -> u64 {
    let w = u64::from_le_bytes(line[end - 8..end].try_into().expect("8 bytes"));
    // The bytes before the n digits cleared (leading zero digits), then the digits' '0'
    // taken off; no byte borrows, as every digit byte is >= '0'.
    let keep = !0u64 << (8 * (8 - n));
    let w = (w & keep) - (0x3030_3030_3030_3030 & keep);
    let w = (w.wrapping_mul(10) + (w >> 8)) & 0x00ff_00ff_00ff_00ff;
    let w = (w.wrapping_mul(100) + (w >> 16)) & 0x0000_ffff_0000_ffff;
    (w.wrapping_mul(10_000) + (w >> 32)) & 0xffff_ffff
}
