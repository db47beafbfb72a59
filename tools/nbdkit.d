#!/usr/sbin/dtrace -qs
/*
 * nbdkit.d: request latency, sizes and errors by command, and the life
 * of connections, for nbdkit on systems with DTrace (illumos, FreeBSD,
 * macOS).  Uses the USDT probes of provider "nbdkit" (server/probes.d).
 * Untested: this build gives a native DTrace no probes, and no D
 * compiler has read this file (nbdkit-tracing(1), DTRACE).
 *
 *   dtrace -qs nbdkit.d -p PID            one server (nbdkit$target)
 *   dtrace -qs nbdkit.d -c 'nbdkit ...'   a server it starts
 *
 * Every 10 seconds and at ^C it prints, per command: requests, errors,
 * payload bytes, and latency distributions (us) for the request's whole
 * life (header read to reply sent) and for its time in the layers
 * (dispatch to done).  It prints a line when a connection closes and
 * when a handshake fails.  Requests are keyed by (pid, connection id,
 * cookie), so replies sent by another thread still match.
 */

#pragma D option quiet
#pragma D option dynvarsize=16m

dtrace:::BEGIN
{
	/* NBD_CMD_*: request_start carries the command's code only. */
	nbd_cmd[0] = "read"; nbd_cmd[1] = "write"; nbd_cmd[2] = "disc";
	nbd_cmd[3] = "flush"; nbd_cmd[4] = "trim"; nbd_cmd[5] = "cache";
	nbd_cmd[6] = "write_zeroes"; nbd_cmd[7] = "block_status";
	printf("Tracing nbdkit... Hit Ctrl-C to end.\n");
}

nbdkit$target:::request_start
/arg2 != 2/
{
	/* id, cookie, command, offset, count, flags */
	start[pid, arg0, arg1] = timestamp;
	cmd[pid, arg0, arg1] = arg2 <= 7 ? nbd_cmd[arg2] : "unknown";
	@size[cmd[pid, arg0, arg1]] = quantize(arg4);
}

nbdkit$target:::request_dispatch
/start[pid, arg0, arg1]/
{
	/* id, cookie, queue_ns */
	dispatch[pid, arg0, arg1] = timestamp;
	@queue_us[cmd[pid, arg0, arg1]] = quantize(arg2 / 1000);
}

nbdkit$target:::request_done
/start[pid, arg0, arg1]/
{
	/* id, cookie, command, error, bytes, duration_ns */
	this->c = cmd[pid, arg0, arg1];
	@requests[this->c] = count();
	@bytes[this->c] = sum(arg4);
	@errors[this->c] = sum(arg3 != 0);
}

nbdkit$target:::request_done
/dispatch[pid, arg0, arg1]/
{
	@layer_us[cmd[pid, arg0, arg1]] =
	    quantize((timestamp - dispatch[pid, arg0, arg1]) / 1000);
	dispatch[pid, arg0, arg1] = 0;
}

nbdkit$target:::reply_send
/start[pid, arg0, arg1]/
{
	/* id, cookie, kind, bytes, chunks */
	@total_us[cmd[pid, arg0, arg1], copyinstr(arg2)] =
	    quantize((timestamp - start[pid, arg0, arg1]) / 1000);
	start[pid, arg0, arg1] = 0;
	cmd[pid, arg0, arg1] = "";
}

nbdkit$target:::connection_accept
{
	/* id, fd, peer, transport, pid, uid */
	@accepted[copyinstr(arg3)] = count();
}

nbdkit$target:::handshake_done
{
	/* id, export, structured, extended */
	export[pid, arg0] = copyinstr(arg1);
	known[pid, arg0] = 1;
}

nbdkit$target:::handshake_fail
{
	/* id, reason */
	printf("%Y pid %d conn %d handshake failed: %s\n", walltimestamp, pid,
	    arg0, copyinstr(arg1));
}

nbdkit$target:::connection_close
{
	/* id, reason, requests, bytes_in, bytes_out, lifetime_ns */
	printf("%Y pid %d conn %d export \"%s\" closed (%s): %d requests, "
	    "%d bytes in, %d bytes out, %d ms\n", walltimestamp, pid, arg0,
	    known[pid, arg0] ? export[pid, arg0] : "?", copyinstr(arg1),
	    arg2, arg3, arg4, arg5 / 1000000);
	/* Assigning zero (or "") frees a dynamic variable. */
	export[pid, arg0] = "";
	known[pid, arg0] = 0;
}

profile:::tick-10s,
dtrace:::END
{
	printf("\n%Y\n", walltimestamp);
	printa("  %-14s requests %@d\n", @requests);
	printa("  %-14s errors %@d\n", @errors);
	printa("  %-14s payload bytes %@d\n", @bytes);
	printa("  connections accepted (%s) %@d\n", @accepted);
	printf("\nqueue (us), by command:\n");
	printa(@queue_us);
	printf("layer (us), by command:\n");
	printa(@layer_us);
	printf("total (us), by command and reply kind:\n");
	printa(@total_us);
	printf("request size (bytes), by command:\n");
	printa(@size);
}
