//! gzip inflate for the reader: ISA-L's igzip (through `isal-sys`, the `igzip` feature)
//! on x86_64, streaming and multi-member, with flate2's error kinds and wording; flate2 +
//! zlib-rs elsewhere.
//!
//! Measured on the 300 MB random-hash trace, one core (`benches/dftracer/RESULTS.md`):
//! igzip inflates it in ~0.12 s of CPU, flate2 + zlib-rs in ~0.17 s. Both stream: igzip
//! keeps its own 32 KiB history (an `inflate_state` of ~70 KiB, one per file being read),
//! so memory stays bounded whatever the size of a member.

#[cfg(all(feature = "igzip", target_arch = "x86_64"))]
use std::io;
use std::io::{BufRead, Read};

/// Which inflater reads a gzip stream. Both inflate every member in turn, as
/// `flate2::bufread::MultiGzDecoder` does, and give the same text, except where a member
/// is cut short: there igzip may stop a byte or so before zlib (bits of the last symbol
/// it holds back for lookahead), so the reader reads a cut file again with zlib
/// (`reader.rs`), and its results stay those of zlib.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inflater {
    /// ISA-L's igzip on x86_64 with the `igzip` feature (zlib-rs otherwise): the fast one.
    Fast,
    /// flate2 + zlib-rs: exact up to the last whole symbol of a cut member.
    Zlib,
}

/// Feeds the text of the gzip stream `input`, inflated by `inflater`, to `f` (as a trait
/// object: one virtual call per read of 256 KiB costs nothing).
pub(crate) fn with_gzip<R: BufRead, T>(
    input: R,
    inflater: Inflater,
    f: impl FnOnce(&mut dyn Read) -> T,
) -> T {
    match inflater {
        #[cfg(all(feature = "igzip", target_arch = "x86_64"))]
        Inflater::Fast => f(&mut Igzip::new(input)),
        _ => f(&mut flate2::bufread::MultiGzDecoder::new(input)),
    }
}

#[cfg(all(feature = "igzip", target_arch = "x86_64"))]
use isal_sys::igzip_lib as isal;

/// ISA-L's stateful inflate over a buffered reader, one gzip member after another.
#[cfg(all(feature = "igzip", target_arch = "x86_64"))]
pub(crate) struct Igzip<R> {
    input: R,
    state: Box<isal::inflate_state>,
    /// The member being read has ended (its trailer checked); another may follow.
    member_done: bool,
    /// A checksum error met in the call that produced the member's last text: reported
    /// on the next read, after that text.
    pending: Option<io::Error>,
}

#[cfg(all(feature = "igzip", target_arch = "x86_64"))]
impl<R: BufRead> Igzip<R> {
    pub(crate) fn new(input: R) -> Self {
        let mut state: Box<std::mem::MaybeUninit<isal::inflate_state>> = Box::new_uninit();
        // SAFETY: `isal_inflate_init` writes every field of the state it is given (it
        // is ISA-L's documented way to make one); the pointer is to a live allocation
        // of the right size and alignment.
        unsafe { isal::isal_inflate_init(state.as_mut_ptr()) };
        // SAFETY: initialised just above.
        let mut state = unsafe { state.assume_init() };
        state.crc_flag = isal::ISAL_GZIP;
        Igzip {
            input,
            state,
            member_done: false,
            pending: None,
        }
    }

    /// Makes the state ready for the next member.
    fn next_member(&mut self) {
        // SAFETY: the state was initialised by `isal_inflate_init`; reset only rewrites
        // its fields.
        unsafe { isal::isal_inflate_reset(&mut *self.state) };
        self.state.crc_flag = isal::ISAL_GZIP;
        self.member_done = false;
    }

    /// One call of `isal_inflate` on what the reader has buffered: (ISA-L's return
    /// code, input bytes used, input bytes offered, text bytes written to `out`).
    fn step(&mut self, out: &mut [u8]) -> io::Result<(i32, usize, usize, usize)> {
        let input = self.input.fill_buf()?;
        let offered = input.len();
        // Buffers past 4 GiB are offered in parts; ours are 256 KiB.
        let avail_in = u32::try_from(offered).unwrap_or(u32::MAX);
        let avail_out = u32::try_from(out.len()).unwrap_or(u32::MAX);
        self.state.next_in = input.as_ptr().cast_mut();
        self.state.avail_in = avail_in;
        self.state.next_out = out.as_mut_ptr();
        self.state.avail_out = avail_out;
        // SAFETY: `next_in`/`avail_in` describe bytes of `input`, which ISA-L only reads
        // (its C API lacks `const`), and `next_out`/`avail_out` bytes of `out`, both
        // borrowed for this call; ISA-L keeps no pointer into them past it (it copies the
        // history it needs into the state, igzip_inflate.c). The state is initialised.
        let ret = unsafe { isal::isal_inflate(&mut *self.state) };
        let used = (avail_in - self.state.avail_in) as usize;
        let made = (avail_out - self.state.avail_out) as usize;
        // Dangling-pointer hygiene: nothing may use these after `input`/`out` go.
        self.state.next_in = std::ptr::null_mut();
        self.state.next_out = std::ptr::null_mut();
        self.input.consume(used);
        Ok((ret, used, offered, made))
    }
}

/// flate2's error for an ISA-L return code below zero (same kind, same words), so a
/// damaged file is reported alike whichever decoder read it.
#[cfg(all(feature = "igzip", target_arch = "x86_64"))]
fn isal_error(ret: i32) -> io::Error {
    let msg = match ret {
        isal::ISAL_INVALID_WRAPPER | isal::ISAL_UNSUPPORTED_METHOD => "invalid gzip header",
        isal::ISAL_INCORRECT_CHECKSUM => "corrupt gzip stream does not have a matching checksum",
        _ => "corrupt deflate stream",
    };
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(all(feature = "igzip", target_arch = "x86_64"))]
impl<R: BufRead> Read for Igzip<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            if self.member_done {
                if self.input.fill_buf()?.is_empty() {
                    return Ok(0);
                }
                self.next_member();
            }
            let (ret, used, offered, made) = self.step(out)?;
            if ret < 0 {
                // As flate2 does: after a checksum or header error the text of the call
                // is whole and is given first; after damaged deflate data the text of
                // the call that met it is dropped, so both decoders count the same
                // lines (they read into buffers of the same size).
                if made == 0
                    || !matches!(
                        ret,
                        isal::ISAL_INCORRECT_CHECKSUM | isal::ISAL_INVALID_WRAPPER
                    )
                {
                    return Err(isal_error(ret));
                }
                self.pending = Some(isal_error(ret));
                return Ok(made);
            }
            self.member_done = self.state.block_state == isal::isal_block_state_ISAL_BLOCK_FINISH;
            if made > 0 {
                return Ok(made);
            }
            if self.member_done {
                continue;
            }
            if offered == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "incomplete deflate stream",
                ));
            }
            if used == 0 {
                // Input offered, none taken and no text: ISA-L is stuck (it always
                // buffers a partial header or symbol in its state); never spin.
                return Err(isal_error(isal::ISAL_INVALID_BLOCK));
            }
        }
    }
}

#[cfg(all(test, feature = "igzip", target_arch = "x86_64"))]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Text with long and short matches and literals: lines of a made-up trace.
    fn text(lines: usize) -> Vec<u8> {
        let mut t = Vec::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..lines {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            writeln!(
                t,
                "{{\"id\":{i},\"name\":\"read\",\"args\":{{\"h\":\"{x:016x}\"}}}}"
            )
            .unwrap();
        }
        t
    }

    /// Everything `r` yields, read `step` bytes at a time, and the error it ends with.
    fn drain(mut r: impl Read, step: usize) -> (Vec<u8>, Option<io::Error>) {
        let mut out = Vec::new();
        let mut buf = vec![0u8; step];
        loop {
            match r.read(&mut buf) {
                Ok(0) => return (out, None),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn igzip_inflates_what_flate2_does_in_any_read_and_buffer_size() {
        let data = text(20_000);
        let mut two = gz(&data);
        two.extend(gz(b"second member\n"));
        for (cap, step) in [(1, 1), (7, 3), (4096, 100_000), (256 * 1024, 256 * 1024)] {
            let input = io::BufReader::with_capacity(cap, &two[..]);
            let (out, err) = drain(Igzip::new(input), step);
            assert!(err.is_none(), "{cap} {step}: {err:?}");
            assert_eq!(out.len(), data.len() + 14, "{cap} {step}");
            assert!(out[..data.len()] == data[..] && out.ends_with(b"second member\n"));
        }
    }

    #[test]
    fn igzip_reports_damage_with_flate2s_kind_and_words() {
        let full = gz(&text(5_000));
        let cut = &full[..full.len() / 2];
        let (_, err) = drain(Igzip::new(cut), 65536);
        assert_eq!(err.unwrap().kind(), io::ErrorKind::UnexpectedEof);
        let mut junk = full.clone();
        junk.extend_from_slice(&[0u8; 10]);
        let (out, err) = drain(Igzip::new(&junk[..]), 65536);
        assert_eq!(out, text(5_000));
        assert_eq!(err.unwrap().to_string(), "invalid gzip header");
        let mut crc = full.clone();
        let at = crc.len() - 6;
        crc[at] ^= 1;
        let (out, err) = drain(Igzip::new(&crc[..]), 65536);
        assert_eq!(out, text(5_000), "the text comes before the checksum error");
        let want = "corrupt gzip stream does not have a matching checksum";
        assert_eq!(err.unwrap().to_string(), want);
        let (out, err) = drain(
            Igzip::new(&b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff"[..]),
            64,
        );
        assert!(out.is_empty() && err.is_some());
    }
}
