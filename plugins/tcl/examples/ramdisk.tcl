#!/usr/local/sbin/nbdkit tcl
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A RAM disk in Tcl: the disk is one byte array held in a global,
# shared by every connection and lost when the server exits.
#
#   nbdkit tcl ramdisk.tcl [size=SIZE]
#
# size= is the disk's size in bytes (default 1048576).  Every byte
# starts as zero; writes, trims and zeroes change it.

set size 1048576
set disk ""

proc config {key value} {
    global size
    if {$key ne "size"} {
        error "unknown parameter $key"
    }
    if {![string is wideinteger -strict $value] || $value < 0} {
        error "size must be a number of bytes, not $value"
    }
    set size $value
}

proc config_complete {} {
    global size disk
    set disk [binary format x$size]
}

proc plugin_open {readonly} {
    # Every connection sees the same disk: the handle is not used.
    return ramdisk
}

proc get_size {h} {
    global size
    return $size
}

proc pread {h count offset} {
    global disk
    return [string range $disk $offset [expr {$offset + $count - 1}]]
}

proc pwrite {h buf offset} {
    global disk
    set last [expr {$offset + [string length $buf] - 1}]
    set disk [string replace $disk $offset $last $buf]
}

proc zero {h count offset may_trim} {
    pwrite $h [binary format x$count] $offset
}

proc trim {h count offset} {
    zero $h $count $offset 1
}

proc plugin_flush {h} {
    # Nothing to do: the disk is in memory.
}
