// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * ibtca-agent PORT: the guest side of `ibtca-fabric exec`. Serves one
 * session at a time on the virtio-serial port PORT (a character device,
 * /dev/vportNpM, named org.ibtca.agent): reads the host's HELLO and EXEC
 * frames, runs the command through /bin/sh (`exec "$@"`), sends its
 * standard output and error as STDOUT and STDERR frames as they come and
 * its exit status as an EXIT frame (128 + N for signal N).
 *
 * Frames: a type byte, a big-endian 32-bit payload length (at most
 * 65536), the payload; the host side and the types are in
 * device/fabric/src/agent_frame.rs.
 *
 * The host closing its socket shows as POLLHUP on the port: the running
 * command's process group is killed and the agent waits for the next
 * session (SIGIO, which the port raises when the host connects, or a
 * one-second poll). Sessions are one at a time: the host serializes them;
 * a HELLO while a command runs ends that command's session too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAYLOAD	65536
#define HEADER		5
#define MAX_ARGS	4096

#define T_HELLO		'H'
#define T_EXEC		'E'
#define T_STDIN		'I'
#define T_STDOUT	'O'
#define T_STDERR	'R'
#define T_EXIT		'X'
#define T_FAIL		'F'

#define FLAG_STDIN	1

static const unsigned char hello[HEADER] = { T_HELLO, 0, 0, 0, 8 };
static int port;
static unsigned char in[2 * (HEADER + MAX_PAYLOAD)];
static size_t in_len;
static sigset_t sigio;

/*
 * Waits until the host is connected: no POLLHUP on the port. A port
 * without a host also polls readable (a read returns 0 at once), so
 * POLLIN alone says nothing here. Bytes buffered from a host that went
 * away are dropped.
 */
static void wait_host(void)
{
	struct timespec second = { .tv_sec = 1 };
	struct pollfd p = { .fd = port, .events = POLLIN };

	for (;;) {
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			continue;
		if (!(p.revents & POLLHUP))
			return;
		/* What is buffered came from a host that is gone. */
		in_len = 0;
		sigtimedwait(&sigio, NULL, &second);
	}
}

/* Reads what the port has into in[]; -1 when the host went away. */
static int fill(void)
{
	ssize_t n;

	if (in_len == sizeof(in))
		return 0;
	n = read(port, in + in_len, sizeof(in) - in_len);
	if (n > 0) {
		in_len += n;
		return 0;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	return -1;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/*
 * The frame at the start of in[]: its type and payload length, 1 when it
 * is complete, 0 when more bytes are needed, -1 when the length is bad.
 */
static int frame(unsigned char *type, uint32_t *len)
{
	if (in_len < HEADER)
		return 0;
	*type = in[0];
	*len = be32(in + 1);
	if (*len > MAX_PAYLOAD)
		return -1;
	return in_len >= HEADER + *len;
}

static void consume(size_t n)
{
	memmove(in, in + n, in_len - n);
	in_len -= n;
}

/* Writes all of buf to the port; -1 when the host went away. */
static int put(const unsigned char *buf, size_t len)
{
	struct pollfd p = { .fd = port, .events = POLLOUT };
	ssize_t n;

	while (len) {
		n = write(port, buf, len);
		if (n > 0) {
			buf += n;
			len -= n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
		if ((p.revents & POLLHUP) && !(p.revents & POLLOUT))
			return -1;
	}
	return 0;
}

static int send_frame(unsigned char type, const void *data, uint32_t len)
{
	unsigned char head[HEADER] = { type, len >> 24, len >> 16, len >> 8,
				       len };

	if (put(head, HEADER))
		return -1;
	return put(data, len);
}

static void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Forwards one pipe's bytes as frames of type; 1 at its end. */
static int relay(int *fd, unsigned char type, int *gone)
{
	static unsigned char buf[16384];
	ssize_t n = read(*fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return 1;
	}
	if (send_frame(type, buf, n))
		*gone = 1;
	return 0;
}

static pid_t spawn(char **argv, int with_stdin, int fds[3])
{
	int p_in[2] = { -1, -1 }, p_out[2], p_err[2];
	pid_t pid;

	if (with_stdin && pipe2(p_in, O_CLOEXEC))
		return -1;
	if (pipe2(p_out, O_CLOEXEC) || pipe2(p_err, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		setsid();
		dup2(with_stdin ? p_in[0] : null, 0);
		dup2(p_out[1], 1);
		dup2(p_err[1], 2);
		if (chdir("/root") && chdir("/"))
			dprintf(2, "ibtca-agent: chdir: %s\n", strerror(errno));
		execv("/bin/sh", argv);
		dprintf(2, "ibtca-agent: /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	if (with_stdin)
		close(p_in[0]);
	close(p_out[1]);
	close(p_err[1]);
	fds[0] = p_in[1];
	fds[1] = p_out[0];
	fds[2] = p_err[0];
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			nonblock(fds[i]);
	return pid;
}

/*
 * Runs the command of an EXEC payload and streams it; -1 when the host
 * went away (the command is then killed).
 */
static int run(unsigned char *payload, uint32_t len)
{
	static char *argv[MAX_ARGS + 5];
	static unsigned char pending[MAX_PAYLOAD];
	size_t pend_len = 0, pend_off = 0;
	int fds[3], argc = 0, gone = 0, status;
	unsigned char code;
	uint32_t i, start;
	pid_t pid;

	if (len < 2 || payload[len - 1] != 0)
		return send_frame(T_FAIL, "malformed request", 17);
	argv[argc++] = "/bin/sh";
	argv[argc++] = "-c";
	argv[argc++] = "exec \"$@\"";
	argv[argc++] = "ibtca-exec";
	for (start = 1, i = 1; i < len; i++) {
		if (payload[i])
			continue;
		if (argc == MAX_ARGS + 4)
			return send_frame(T_FAIL, "too many arguments", 18);
		argv[argc++] = (char *)payload + start;
		start = i + 1;
	}
	argv[argc] = NULL;
	pid = spawn(argv, payload[0] & FLAG_STDIN, fds);
	if (pid < 0)
		return send_frame(T_FAIL, strerror(errno), strlen(strerror(errno)));

	while ((fds[1] >= 0 || fds[2] >= 0) && !gone) {
		struct pollfd p[4];
		unsigned char type;
		uint32_t flen;
		int r;

		/*
		 * At most one STDIN frame waits for the command to read it. A
		 * HELLO is the next session's: this one's host went away (its
		 * POLLHUP can be missed when the next host connects at once),
		 * so the command is killed and the HELLO left for session().
		 */
		while ((r = frame(&type, &flen)) != 0) {
			if (r < 0 || type == T_HELLO) {
				gone = 1;
				break;
			}
			if (type != T_STDIN) {
				consume(HEADER + flen);
				continue;
			}
			if (pend_len)
				break;
			if (flen && fds[0] >= 0) {
				memcpy(pending, in + HEADER, flen);
				pend_len = flen;
			} else if (!flen && fds[0] >= 0) {
				close(fds[0]);
				fds[0] = -1;
			}
			consume(HEADER + flen);
		}
		if (gone)
			break;
		p[0] = (struct pollfd){ .fd = port,
					.events = in_len < sizeof(in) ? POLLIN : 0 };
		p[1] = (struct pollfd){ .fd = fds[1], .events = POLLIN };
		p[2] = (struct pollfd){ .fd = fds[2], .events = POLLIN };
		p[3] = (struct pollfd){ .fd = pend_len ? fds[0] : -1,
					.events = POLLOUT };
		if (poll(p, 4, -1) < 0)
			continue;
		if ((p[0].revents & POLLHUP) && !(p[0].revents & POLLIN))
			break;
		if (p[0].revents & POLLIN && fill())
			break;
		if (p[1].revents)
			relay(&fds[1], T_STDOUT, &gone);
		if (p[2].revents)
			relay(&fds[2], T_STDERR, &gone);
		if (p[3].revents) {
			ssize_t n = write(fds[0], pending + pend_off,
					  pend_len - pend_off);

			if (n > 0)
				pend_off += n;
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				pend_off = pend_len;
			if (pend_off == pend_len)
				pend_len = pend_off = 0;
		}
	}
	if (fds[1] >= 0 || fds[2] >= 0 || gone)
		kill(-pid, SIGKILL);
	for (int k = 0; k < 3; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (gone || fds[1] >= 0 || fds[2] >= 0)
		return -1;
	code = WIFEXITED(status) ? WEXITSTATUS(status) :
				   128 + WTERMSIG(status);
	return send_frame(T_EXIT, &code, 1);
}

/*
 * Drops the bytes before the first HELLO header in in[]; whether in[]
 * now starts with a whole HELLO frame.
 */
static int hello_buffered(void)
{
	while (in_len >= HEADER && memcmp(in, hello, HEADER))
		consume(1);
	return in_len >= HEADER + 8;
}

/* One session: HELLO, EXEC, the command; returns when it is over. */
static void session(void)
{
	unsigned char type;
	uint32_t len;
	int r, said_hello = 0;

	for (;;) {
		struct pollfd p = { .fd = port, .events = POLLIN };

		/*
		 * Until a HELLO header, skip byte by byte: leftovers, whose
		 * "length" must not make the agent wait for more bytes.
		 */
		while (!said_hello && in_len >= HEADER && memcmp(in, hello, HEADER))
			consume(1);
		while ((r = frame(&type, &len)) != 0) {
			if (r < 0)
				return;
			if (type == T_HELLO && len == 8) {
				unsigned char nonce[8];

				memcpy(nonce, in + HEADER, 8);
				consume(HEADER + len);
				if (send_frame(T_HELLO, nonce, 8))
					return;
				said_hello = 1;
			} else if (type == T_EXEC) {
				static unsigned char req[MAX_PAYLOAD];

				memcpy(req, in + HEADER, len);
				consume(HEADER + len);
				run(req, len);
				return;
			} else {
				consume(HEADER + len);
			}
		}
		if (poll(&p, 1, -1) < 0)
			continue;
		if ((p.revents & POLLHUP) && !(p.revents & POLLIN))
			return;
		if (fill())
			return;
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: ibtca-agent PORT\n");
		return 2;
	}
	port = open(argv[1], O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (port < 0) {
		fprintf(stderr, "ibtca-agent: %s: %s\n", argv[1],
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigio);
	sigaddset(&sigio, SIGIO);
	sigprocmask(SIG_BLOCK, &sigio, NULL);
	fcntl(port, F_SETOWN, getpid());
	fcntl(port, F_SETFL, fcntl(port, F_GETFL) | O_ASYNC);
	/*
	 * What an ended session leaves (input sent after the exit status) is
	 * skipped; a HELLO already read (the one that ended a command whose
	 * host went away unseen) starts the next session at once: the port
	 * has nothing more to read, so waiting on it would leave that host
	 * unanswered, and every later one answered a session late.
	 */
	for (;;) {
		if (!hello_buffered())
			wait_host();
		session();
	}
}
