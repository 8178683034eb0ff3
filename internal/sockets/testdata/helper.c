/*
 * Socket-audit test helper (C). The audit must report exactly the options
 * set here. Usage: helper PORT FASTOPEN_QLEN MODE
 *
 * It listens on 127.0.0.1:PORT with TCP_FASTOPEN=FASTOPEN_QLEN and connects
 * four clients to itself:
 *   nagle    no options (Nagle's algorithm on)
 *   nodelay  TCP_NODELAY=1
 *   cork     TCP_CORK=1
 *   sndbuf   SO_SNDBUF=65536 (set before connect; Linux reports 131072)
 * With MODE "nodelay" every socket, accepted ones included, gets TCP_NODELAY
 * and none is corked (the doctor's no-finding case).
 * It prints "NAME LOCALPORT" per client, "pid PID", then "ready". On stdin, "talk N"
 * runs N write-write-read exchanges of 100-byte messages on the nagle and
 * nodelay connections and prints "done"; end of input exits.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what) { perror(what); exit(1); }

static void setint(int fd, int level, int opt, int v, const char *what)
{
	if (setsockopt(fd, level, opt, &v, sizeof v) < 0)
		die(what);
}

static void full(int fd, char *buf, size_t n, int rd)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = rd ? read(fd, buf + done, n - done) : write(fd, buf + done, n - done);
		if (r <= 0)
			die(rd ? "read" : "write");
		done += (size_t)r;
	}
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: helper PORT FASTOPEN_QLEN all|nodelay\n");
		return 2;
	}
	int port = atoi(argv[1]), qlen = atoi(argv[2]);
	int allnd = strcmp(argv[3], "nodelay") == 0;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);

	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		die("socket");
	setint(l, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
	setint(l, IPPROTO_TCP, TCP_FASTOPEN, qlen, "TCP_FASTOPEN");
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0)
		die("bind");
	if (listen(l, 64) < 0)
		die("listen");

	const char *names[4] = {"nagle", "nodelay", "cork", "sndbuf"};
	int c[4], s[4];
	for (int i = 0; i < 4; i++) {
		c[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (c[i] < 0)
			die("socket");
		if (i == 1 || allnd)
			setint(c[i], IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
		if (i == 2 && !allnd)
			setint(c[i], IPPROTO_TCP, TCP_CORK, 1, "TCP_CORK");
		if (i == 3)
			setint(c[i], SOL_SOCKET, SO_SNDBUF, 65536, "SO_SNDBUF");
		if (connect(c[i], (struct sockaddr *)&a, sizeof a) < 0)
			die("connect");
		s[i] = accept(l, NULL, NULL);
		if (s[i] < 0)
			die("accept");
		if (allnd)
			setint(s[i], IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
		struct sockaddr_in me;
		socklen_t ml = sizeof me;
		getsockname(c[i], (struct sockaddr *)&me, &ml);
		printf("%s %d\n", names[i], ntohs(me.sin_port));
	}
	printf("pid %d\nready\n", (int)getpid());
	fflush(stdout);

	char line[64], buf[200];
	memset(buf, 'x', sizeof buf);
	while (fgets(line, sizeof line, stdin)) {
		int n = 0;
		if (sscanf(line, "talk %d", &n) != 1)
			continue;
		for (int r = 0; r < n; r++) {
			for (int i = 0; i < 2; i++) {
				full(c[i], buf, 100, 0);
				full(c[i], buf, 100, 0);
				full(s[i], buf, 200, 1);
				full(s[i], buf, 100, 0);
				full(c[i], buf, 100, 1);
			}
		}
		printf("done\n");
		fflush(stdout);
	}
	return 0;
}
