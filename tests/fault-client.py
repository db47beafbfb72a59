#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A rude NBD client for the fault tests: it speaks just enough of the
# protocol (fixed newstyle, NBD_OPT_EXPORT_NAME, simple replies) to
# leave the server in the lurch on purpose.
#
#   fault-client.py big-read SOCKET COUNT ROUNDS
#       ROUNDS times: connect, ask for COUNT 32 MiB reads, take a few
#       bytes of the first reply and hang up while the server is still
#       sending.
#   fault-client.py stdio-big-read NBDKIT [ARGS...]
#       run "NBDKIT -s ARGS" on pipes, ask for a 32 MiB read, close the
#       pipe the reply comes on after a few bytes, and print the
#       server's exit status (negative: the signal that killed it).
#   fault-client.py partial-write SOCKET OFFSET LENGTH SENT
#       send a LENGTH-byte write at OFFSET with only SENT bytes of its
#       payload (0xAA), close our sending side, and print how many
#       bytes the server sent back before closing (a reply is 16).
import socket
import struct
import subprocess
import sys

NBD_REQUEST_MAGIC = 0x25609513
NBD_CMD_READ, NBD_CMD_WRITE = 0, 1
BIG = 32 * 1024 * 1024


def read_exact(recv, n):
    buf = b""
    while len(buf) < n:
        chunk = recv(n - len(buf))
        if not chunk:
            raise EOFError("server closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def handshake(send, recv):
    """Fixed newstyle, no zeroes, NBD_OPT_EXPORT_NAME ""; the size."""
    hello = read_exact(recv, 18)
    assert hello[:8] == b"NBDMAGIC" and hello[8:16] == b"IHAVEOPT", hello
    send(struct.pack(">I", 3))                  # FIXED_NEWSTYLE|NO_ZEROES
    send(b"IHAVEOPT" + struct.pack(">II", 1, 0))
    size, _flags = struct.unpack(">QH", read_exact(recv, 10))
    return size


def request(cmd, cookie, offset, length):
    return struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0, cmd, cookie, offset,
                       length)


def unix_socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    return s


def big_read(path, count, rounds):
    for _ in range(rounds):
        s = unix_socket(path)
        handshake(s.sendall, s.recv)
        s.sendall(b"".join(request(NBD_CMD_READ, i + 1, 0, BIG)
                           for i in range(count)))
        read_exact(s.recv, 16 + 4096)           # the reply has started
        # Reset rather than a polite FIN: the server's next send fails.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
        s.close()


def stdio_big_read(argv):
    p = subprocess.Popen(argv[:1] + ["-s"] + argv[1:], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)

    def send(b):
        p.stdin.write(b)
        p.stdin.flush()
    handshake(send, p.stdout.read1)
    send(request(NBD_CMD_READ, 1, 0, BIG))
    read_exact(p.stdout.read1, 16 + 4096)
    p.stdout.close()                            # writes now get EPIPE
    p.stdin.close()                             # and then end of input
    print(p.wait(timeout=60))


def partial_write(path, offset, length, sent):
    s = unix_socket(path)
    handshake(s.sendall, s.recv)
    s.sendall(request(NBD_CMD_WRITE, 1, offset, length) + b"\xaa" * sent)
    s.shutdown(socket.SHUT_WR)
    got = 0
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += len(chunk)
    s.close()
    print(got)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "big-read":
        big_read(args[0], int(args[1]), int(args[2]))
    elif mode == "stdio-big-read":
        stdio_big_read(args)
    elif mode == "partial-write":
        partial_write(args[0], int(args[1]), int(args[2]), int(args[3]))
    else:
        sys.exit("fault-client.py: unknown mode " + mode)


if __name__ == "__main__":
    main()
