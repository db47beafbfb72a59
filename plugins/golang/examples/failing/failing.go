// SPDX-License-Identifier: BSD-3-Clause (see LICENSE)

// A plugin whose failures are on purpose, to show (and test) how errors
// cross the boundary: a 4 MiB disk of 0xAB bytes where a read at or
// past 1 MiB fails with the errno given by err= (default EIO), a read
// at or past 2 MiB panics (recovered: the client gets EIO, the server
// goes on), a write fails with ENOSPC, and opening the export "refuse"
// fails with EACCES.  It also drives nbdkit 1.34..1.40's calls as
// tests/lang/server-calls.sh expects: prob= and delay= parsed by the
// server, a read at 4096 or 8192 disconnecting (forced, soft), and a
// read at 12288 answering with the parsed values.
package main

import (
	"fmt"
	"math"
	"strconv"
	"syscall"

	"nbdkit.local/golang/nbdkit"
)

type failing struct {
	errno     syscall.Errno
	prob      float64
	sec, nsec uint32
}
type conn struct{}

var plugin = &failing{errno: syscall.EIO}

func (p *failing) Info() nbdkit.Info { return nbdkit.Info{Name: "failing"} }

func (p *failing) Config(key, value string) (err error) {
	switch key {
	case "prob":
		p.prob, err = nbdkit.ParseProbability("prob", value)
		return err
	case "delay":
		p.sec, p.nsec, err = nbdkit.ParseDelay("delay", value)
		return err
	}
	if key != "err" {
		return nbdkit.Errorf(syscall.EINVAL, "unknown parameter %q", key)
	}
	n, err := strconv.Atoi(value)
	if err != nil {
		return nbdkit.Errorf(syscall.EINVAL, "err=%s: not a number", value)
	}
	p.errno = syscall.Errno(n)
	return nil
}

func (p *failing) Open(readonly bool) (nbdkit.Connection, error) {
	if nbdkit.ExportName() == "refuse" {
		return nil, nbdkit.Errorf(syscall.EACCES, "export \"refuse\" is refused")
	}
	return &conn{}, nil
}

func (c *conn) GetSize() (uint64, error) { return 4 << 20, nil }

func (c *conn) PRead(buf []byte, off uint64, flags uint32) error {
	if off >= 2<<20 {
		panic("read at " + strconv.FormatUint(off, 10) + " panics on purpose")
	}
	if off >= 1<<20 {
		return nbdkit.Errorf(plugin.errno, "read at %d fails on purpose", off)
	}
	switch off {
	case 4096:
		nbdkit.Disconnect(true)
	case 8192:
		nbdkit.Disconnect(false)
	case 12288:
		line := fmt.Sprintf("%d %d %d", int64(math.Round(plugin.prob*1e6)),
			plugin.sec, plugin.nsec)
		for i := range buf {
			buf[i] = ' '
		}
		copy(buf, line)
		return nil
	}
	for i := range buf {
		buf[i] = 0xab
	}
	return nil
}

func (c *conn) PWrite(buf []byte, off uint64, flags uint32) error {
	return nbdkit.Errorf(syscall.ENOSPC, "write at %d fails on purpose", off)
}

func init() { nbdkit.Register(plugin, &conn{}) }

func main() {}
