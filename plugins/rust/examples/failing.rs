// SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
// A plugin whose failures are on purpose, to show (and test) how errors
// cross the boundary: a 4 MiB disk of 0xAB bytes where a read at or past
// 1 MiB fails with the errno given by err= (default EIO), a read at or
// past 2 MiB panics (caught: the client gets EIO, the server goes on),
// a write fails with ENOSPC, and opening the export "refuse" fails
// with EACCES.  It also drives nbdkit 1.34..1.40's calls as
// tests/lang/server-calls.sh expects: prob= and delay= parsed by the
// server, a read at 4096 or 8192 disconnecting (forced, soft), and a
// read at 12288 answering with the parsed values.
use nbdkit::{errno, Error, Flags, Result, Server};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

static ERR: AtomicI32 = AtomicI32::new(errno::EIO);
static PROB_PPM: AtomicU64 = AtomicU64::new(0);
static DELAY: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];

struct Failing;

impl Server for Failing {
    const NAME: &'static str = "failing";

    fn config(key: &str, value: &str) -> Result<()> {
        match key {
            "prob" => {
                let p = nbdkit::parse_probability("prob", value)?;
                PROB_PPM.store((p * 1e6).round() as u64, Ordering::Relaxed);
                Ok(())
            }
            "delay" => {
                let (sec, nsec) = nbdkit::parse_delay("delay", value)?;
                DELAY[0].store(sec, Ordering::Relaxed);
                DELAY[1].store(nsec, Ordering::Relaxed);
                Ok(())
            }
            "err" => {
                let n: i32 = value
                    .parse()
                    .map_err(|_| Error::new(errno::EINVAL, format!("err={}: not a number", value)))?;
                ERR.store(n, Ordering::Relaxed);
                Ok(())
            }
            _ => Err(Error::new(errno::EINVAL, format!("unknown parameter \"{}\"", key))),
        }
    }
    fn open(_readonly: bool) -> Result<Self> {
        if nbdkit::export_name().as_deref() == Some("refuse") {
            return Err(Error::new(errno::EACCES, "export \"refuse\" is refused"));
        }
        Ok(Failing)
    }
    fn get_size(&self) -> Result<u64> {
        Ok(4 << 20)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if offset >= 2 << 20 {
            panic!("read at {} panics on purpose", offset);
        }
        if offset >= 1 << 20 {
            return Err(Error::new(ERR.load(Ordering::Relaxed), format!("read at {} fails on purpose", offset)));
        }
        match offset {
            4096 => nbdkit::disconnect(true),
            8192 => nbdkit::disconnect(false),
            12288 => {
                let line = format!("{} {} {}", PROB_PPM.load(Ordering::Relaxed),
                                   DELAY[0].load(Ordering::Relaxed), DELAY[1].load(Ordering::Relaxed));
                buf.fill(b' ');
                let n = line.len().min(buf.len());
                buf[..n].copy_from_slice(&line.as_bytes()[..n]);
                return Ok(());
            }
            _ => {}
        }
        buf.fill(0xab);
        Ok(())
    }
    fn write_at(&self, _buf: &[u8], offset: u64, _flags: Flags) -> Result<()> {
        Err(Error::new(errno::ENOSPC, format!("write at {} fails on purpose", offset)))
    }
}

nbdkit::plugin!(Failing { config, write_at });
