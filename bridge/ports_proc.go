package bridge

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// tcpListen is the state LISTEN in /proc/net/tcp (include/net/tcp_states.h).
const tcpListen = "0A"

// listeningPorts are the TCP ports that listen in this network namespace,
// on any address, read from /proc/net/tcp and /proc/net/tcp6 (empty where
// there is no such file).
func listeningPorts() map[int]bool {
	out := map[int]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		parseProcNetTCP(b, out)
	}
	return out
}

// parseProcNetTCP adds the listening ports of a /proc/net/tcp table to out.
// A line is "sl local_address rem_address st ...", the local address
// HEXIP:HEXPORT.
func parseProcNetTCP(b []byte, out map[int]bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 512), 4096)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		if p, err := strconv.ParseUint(f[1][i+1:], 16, 16); err == nil && p > 0 {
			out[int(p)] = true
		}
	}
}
