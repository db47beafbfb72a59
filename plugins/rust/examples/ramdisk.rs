// SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
// A RAM disk in Rust: `nbdkit ./libramdisk.so size=64M`.  Every
// connection sees the same bytes; all zero until written.  Trim and
// zero clear bytes, and extents reports blocks never written (or
// cleared) as holes, in 64 KiB blocks.  Each write fires the server's
// generic probe "user" with the name "ramdisk_write", the offset and
// the length.
use nbdkit::{Error, Extents, Flags, Result, Server, ThreadModel};
use std::sync::{Mutex, RwLock};

const BLOCK: u64 = 65536;

struct Disk {
    bytes: Vec<u8>,
    written: Vec<bool>, // per 64 KiB block: holds data that may be non-zero
}

static SIZE: Mutex<u64> = Mutex::new(0);
static DISK: RwLock<Option<Disk>> = RwLock::new(None);

struct RamDisk;

impl RamDisk {
    fn mark(d: &mut Disk, offset: u64, len: u64, data: bool) {
        if len == 0 {
            return;
        }
        let first = offset / BLOCK;
        let last = (offset + len - 1) / BLOCK;
        for b in first..=last {
            if data {
                d.written[b as usize] = true;
            } else {
                let start = b * BLOCK;
                let end = std::cmp::min(start + BLOCK, d.bytes.len() as u64);
                if d.bytes[start as usize..end as usize].iter().all(|&x| x == 0) {
                    d.written[b as usize] = false;
                }
            }
        }
    }
    fn check(d: &Disk, len: u64, offset: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= d.bytes.len() as u64 => Ok(()),
            _ => Err(Error::new(nbdkit::errno::EINVAL, "request beyond the end of the disk")),
        }
    }
}

impl Server for RamDisk {
    const NAME: &'static str = "ramdisk";
    const VERSION: Option<&'static str> = Some("1.0");
    const DESCRIPTION: Option<&'static str> = Some("a RAM disk written in Rust");
    const CONFIG_HELP: Option<&'static str> = Some("size=<SIZE>  (required) The disk's size.");
    const MAGIC_CONFIG_KEY: Option<&'static str> = Some("size");
    const THREAD_MODEL: ThreadModel = ThreadModel::Parallel;

    fn config(key: &str, value: &str) -> Result<()> {
        match key {
            "size" => {
                *SIZE.lock().unwrap() = nbdkit::parse_size(value)?;
                Ok(())
            }
            _ => Err(Error::new(nbdkit::errno::EINVAL, format!("unknown parameter \"{}\"", key))),
        }
    }
    fn config_complete() -> Result<()> {
        let size = *SIZE.lock().unwrap();
        if size == 0 {
            return Err(Error::new(nbdkit::errno::EINVAL, "size= is required"));
        }
        let blocks = (size + BLOCK - 1) / BLOCK;
        *DISK.write().unwrap() = Some(Disk {
            bytes: vec![0; size as usize],
            written: vec![false; blocks as usize],
        });
        nbdkit::debug(&format!("ramdisk: {} bytes", size));
        Ok(())
    }
    fn open(_readonly: bool) -> Result<Self> {
        Ok(RamDisk)
    }
    fn get_size(&self) -> Result<u64> {
        Ok(DISK.read().unwrap().as_ref().unwrap().bytes.len() as u64)
    }
    fn can_multi_conn(&self) -> Result<bool> {
        Ok(true)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let g = DISK.read().unwrap();
        let d = g.as_ref().unwrap();
        Self::check(d, buf.len() as u64, offset)?;
        buf.copy_from_slice(&d.bytes[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64, _flags: Flags) -> Result<()> {
        let mut g = DISK.write().unwrap();
        let d = g.as_mut().unwrap();
        Self::check(d, buf.len() as u64, offset)?;
        d.bytes[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        Self::mark(d, offset, buf.len() as u64, true);
        nbdkit::probe("ramdisk_write", offset as i64, buf.len() as i64, "");
        Ok(())
    }
    fn flush(&self, _flags: Flags) -> Result<()> {
        Ok(())
    }
    fn trim(&self, count: u32, offset: u64, flags: Flags) -> Result<()> {
        self.zero(count, offset, flags)
    }
    fn zero(&self, count: u32, offset: u64, _flags: Flags) -> Result<()> {
        let mut g = DISK.write().unwrap();
        let d = g.as_mut().unwrap();
        Self::check(d, count as u64, offset)?;
        d.bytes[offset as usize..offset as usize + count as usize].fill(0);
        Self::mark(d, offset, count as u64, false);
        Ok(())
    }
    fn can_extents(&self) -> Result<bool> {
        Ok(true)
    }
    fn extents(&self, count: u32, offset: u64, flags: Flags, e: &mut Extents) -> Result<()> {
        let g = DISK.read().unwrap();
        let d = g.as_ref().unwrap();
        let size = d.bytes.len() as u64;
        let end = std::cmp::min(offset + count as u64, size);
        let mut pos = offset;
        while pos < end {
            let b = pos / BLOCK;
            let next = std::cmp::min((b + 1) * BLOCK, size);
            let kind = if d.written[b as usize] { 0 } else { nbdkit::EXTENT_HOLE | nbdkit::EXTENT_ZERO };
            e.add(pos, next - pos, kind)?;
            if flags.req_one() {
                break;
            }
            pos = next;
        }
        Ok(())
    }
}

nbdkit::plugin!(RamDisk {
    config, config_complete, can_multi_conn, write_at, flush, trim, zero,
    can_extents, extents
});
