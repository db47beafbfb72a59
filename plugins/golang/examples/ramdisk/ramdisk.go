// SPDX-License-Identifier: BSD-3-Clause (see LICENSE)

// A RAM disk in Go: `nbdkit ./ramdisk.so size=64M`.  Every connection
// sees the same bytes, all zero until written; trim and zero clear
// bytes, and extents reports 64 KiB blocks never written (or cleared)
// as holes.  Each write fires the server's generic probe "user" with
// the name "ramdisk_write", the offset and the length.
package main

import (
	"sync"
	"syscall"

	"nbdkit.local/golang/nbdkit"
)

const block = 65536

type ramDisk struct {
	size    uint64
	mu      sync.RWMutex
	bytes   []byte
	written []bool
}

type conn struct{ d *ramDisk }

var disk = &ramDisk{}

func (d *ramDisk) Info() nbdkit.Info {
	return nbdkit.Info{
		Name:           "ramdisk",
		Version:        "1.0",
		Description:    "a RAM disk written in Go",
		ConfigHelp:     "size=<SIZE>  (required) The disk's size.",
		MagicConfigKey: "size",
		ThreadModel:    nbdkit.ThreadModelParallel,
	}
}

func (d *ramDisk) Config(key, value string) error {
	if key != "size" {
		return nbdkit.Errorf(syscall.EINVAL, "unknown parameter %q", key)
	}
	n, err := nbdkit.ParseSize(value)
	d.size = n
	return err
}

func (d *ramDisk) ConfigComplete() error {
	if d.size == 0 {
		return nbdkit.Errorf(syscall.EINVAL, "size= is required")
	}
	d.bytes = make([]byte, d.size)
	d.written = make([]bool, (d.size+block-1)/block)
	nbdkit.Debug("ramdisk: %d bytes", d.size)
	return nil
}

func (d *ramDisk) Open(readonly bool) (nbdkit.Connection, error) {
	return &conn{d}, nil
}

func (c *conn) check(n, off uint64) error {
	if off+n < off || off+n > c.d.size {
		return nbdkit.Errorf(syscall.EINVAL, "request beyond the end of the disk")
	}
	return nil
}

func (c *conn) mark(off, n uint64, data bool) {
	if n == 0 {
		return
	}
	for b := off / block; b <= (off+n-1)/block; b++ {
		if data {
			c.d.written[b] = true
			continue
		}
		start, end := b*block, (b+1)*block
		if end > c.d.size {
			end = c.d.size
		}
		clear := true
		for _, x := range c.d.bytes[start:end] {
			if x != 0 {
				clear = false
				break
			}
		}
		if clear {
			c.d.written[b] = false
		}
	}
}

func (c *conn) GetSize() (uint64, error)       { return c.d.size, nil }
func (c *conn) CanMultiConn() (bool, error)    { return true, nil }
func (c *conn) CanExtents() (bool, error)      { return true, nil }
func (c *conn) Flush(flags uint32) error       { return nil }

func (c *conn) PRead(buf []byte, off uint64, flags uint32) error {
	c.d.mu.RLock()
	defer c.d.mu.RUnlock()
	if err := c.check(uint64(len(buf)), off); err != nil {
		return err
	}
	copy(buf, c.d.bytes[off:])
	return nil
}

func (c *conn) PWrite(buf []byte, off uint64, flags uint32) error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if err := c.check(uint64(len(buf)), off); err != nil {
		return err
	}
	copy(c.d.bytes[off:], buf)
	c.mark(off, uint64(len(buf)), true)
	nbdkit.Probe("ramdisk_write", int64(off), int64(len(buf)), "")
	return nil
}

func (c *conn) Zero(n uint32, off uint64, flags uint32) error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if err := c.check(uint64(n), off); err != nil {
		return err
	}
	b := c.d.bytes[off : off+uint64(n)]
	for i := range b {
		b[i] = 0
	}
	c.mark(off, uint64(n), false)
	return nil
}

func (c *conn) Trim(n uint32, off uint64, flags uint32) error { return c.Zero(n, off, flags) }

func (c *conn) Extents(n uint32, off uint64, flags uint32, e *nbdkit.Extents) error {
	c.d.mu.RLock()
	defer c.d.mu.RUnlock()
	end := off + uint64(n)
	if end > c.d.size {
		end = c.d.size
	}
	for pos := off; pos < end; {
		b := pos / block
		next := (b + 1) * block
		if next > c.d.size {
			next = c.d.size
		}
		var typ uint32
		if !c.d.written[b] {
			typ = nbdkit.ExtentHole | nbdkit.ExtentZero
		}
		if err := e.Add(pos, next-pos, typ); err != nil {
			return err
		}
		if flags&nbdkit.FlagReqOne != 0 {
			break
		}
		pos = next
	}
	return nil
}

func init() { nbdkit.Register(disk, &conn{}) }

func main() {}
