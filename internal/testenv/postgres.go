package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PG is a PostgreSQL instance a test started for itself (Postgres).
type PG struct {
	port int
	dir  string // holds data/ and log
	cmd  *exec.Cmd
	done chan struct{} // closed when the server process has exited
	n    atomic.Int64  // databases created
}

// Postgres requires PostgreSQL's server programs (Debian's postgresql
// package, which `make tools` installs) and starts an instance of t's own:
// a new data folder under the temporary folder, copied from a template
// that initdb makes once per version (cached under ~/.cache/agentbox),
// listening on a free loopback port and no Unix socket, run as a user that
// is not root (postgres, when the tests run as root), with durability off
// since test data are thrown away. The instance stops and its folder goes
// when t ends, and it is killed with the test process. No system cluster
// is ever touched. Without PostgreSQL, t is skipped, or fails under
// CI=true.
func Postgres(t testing.TB) *PG {
	t.Helper()
	bin, version, err := postgresBin()
	if err != nil {
		Missing(t, "PostgreSQL's server programs ("+err.Error()+"; `make tools` installs Debian's postgresql)")
	}
	cred, err := postgresUser()
	if err != nil {
		Missing(t, "a user other than root to run PostgreSQL as ("+err.Error()+")")
	}
	cleanStalePostgres()
	tmpl, err := postgresTemplate(bin, version, cred)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("agentbox-pg-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// The server's user reaches its data folder through dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", tmpl, filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		t.Fatalf("postgres: copy the template: %v\n%s", err, out)
	}
	var p *PG
	for attempt := 0; ; attempt++ {
		p, err = startPostgres(bin, dir, cred)
		if err == nil {
			break
		}
		if attempt == 2 || !strings.Contains(err.Error(), "could not bind") {
			t.Fatalf("postgres: %v", err)
		}
	}
	t.Cleanup(p.stop)
	return p
}

// DSN is the connection string of database db as the superuser postgres.
func (p *PG) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// Port is the instance's TCP port on 127.0.0.1.
func (p *PG) Port() int { return p.port }

// NewDatabase creates an empty database and returns its DSN. It is dropped
// with the instance.
func (p *PG) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", p.n.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("postgres: create database: %v", err)
	}
	return p.DSN(name)
}

// Kill ends the server at once (SIGKILL), as a crash would.
func (p *PG) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop shuts the server down (fast shutdown: sessions are ended), killing
// it when that takes too long.
func (p *PG) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func startPostgres(bin, dir string, cred *syscall.Credential) (*PG, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return startPostgresOn(bin, dir, cred, port)
}

func startPostgresOn(bin, dir string, cred *syscall.Credential, port int) (*PG, error) {
	logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p := &PG{port: port, dir: dir, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "data"), "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=32MB", "-c", "log_min_messages=warning")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	// The server dies with the test process (SIGQUIT: immediate
	// shutdown). The parent-death signal follows the thread that started
	// the child, so that thread stays locked until the server exits.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := p.cmd.Start()
		started <- err
		if err == nil {
			_ = p.cmd.Wait()
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s/postgres: %w", bin, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, p.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			cancel()
			return p, nil
		}
		cancel()
		select {
		case <-p.done:
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return nil, fmt.Errorf("the server exited: %s", bytes.TrimSpace(log))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return nil, fmt.Errorf("the server does not answer on port %d: %v\n%s", port, err, log)
		}
	}
}

var postgresVersion = regexp.MustCompile(`\(PostgreSQL\) ([0-9][0-9.]*)`)

// postgresBin finds PostgreSQL's programs: AGENTBOX_POSTGRES_BIN, else the
// newest of Debian's /usr/lib/postgresql/*/bin, else postgres on PATH. It
// returns their folder and the server's version.
func postgresBin() (dir, version string, err error) {
	dir = os.Getenv("AGENTBOX_POSTGRES_BIN")
	if dir == "" {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
		slices.SortFunc(found, func(a, b string) int {
			va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
			vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
			return vb - va
		})
		if len(found) > 0 {
			dir = filepath.Dir(found[0])
		} else if p, err := exec.LookPath("postgres"); err == nil {
			dir = filepath.Dir(p)
		} else {
			return "", "", fmt.Errorf("no postgres in /usr/lib/postgresql/*/bin or on PATH")
		}
	}
	out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s/postgres --version: %w", dir, err)
	}
	m := postgresVersion.FindSubmatch(out)
	if m == nil {
		return "", "", fmt.Errorf("%s/postgres --version: %q", dir, out)
	}
	return dir, string(m[1]), nil
}

// postgresUser is who runs the server: the current user, or postgres when
// that is root (the server refuses to run as root).
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("tests run as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

var (
	templateMu sync.Mutex
	templates  = map[string]string{}
)

// postgresTemplate returns a data folder initdb made for version, cached
// under ~/.cache/agentbox/postgres; processes building it at once take
// turns (a file lock).
func postgresTemplate(bin, version string, cred *syscall.Credential) (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	if p, ok := templates[version]; ok {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	owner := "self"
	if cred != nil {
		owner = strconv.Itoa(int(cred.Uid))
	}
	root := filepath.Join(cache, "agentbox", "postgres")
	final := filepath.Join(root, version+"-"+owner)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(final, "PG_VERSION")); err != nil {
		if err := initTemplate(bin, final, cred); err != nil {
			return "", err
		}
	}
	templates[version] = final
	return final, nil
}

// initTemplate runs initdb in a temporary folder the server's user can
// reach, then copies the result to final.
func initTemplate(bin, final string, cred *syscall.Credential) error {
	tmp, err := os.MkdirTemp("", fmt.Sprintf("agentbox-pg-%d-initdb-", os.Getpid()))
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	data := filepath.Join(tmp, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	cmd.Dir = tmp
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	_ = os.RemoveAll(final)
	if out, err := exec.Command("cp", "-a", data, final).CombinedOutput(); err != nil {
		return fmt.Errorf("cache the initdb template: %v\n%s", err, out)
	}
	return nil
}

// cleanStalePostgres removes the folders of instances whose test process
// is gone (killed before its cleanup ran); their servers died with it.
func cleanStalePostgres() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "agentbox-pg-*"))
	for _, d := range dirs {
		f := strings.SplitN(strings.TrimPrefix(filepath.Base(d), "agentbox-pg-"), "-", 2)
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			_ = os.RemoveAll(d)
		}
	}
}

// Restart stops the server (fast shutdown: every session ends) and starts
// it again on the same port and data.
func (p *PG) Restart(t testing.TB) {
	t.Helper()
	p.stop()
	bin, _, err := postgresBin()
	if err != nil {
		t.Fatal(err)
	}
	cred, err := postgresUser()
	if err != nil {
		t.Fatal(err)
	}
	q, err := startPostgresOn(bin, p.dir, cred, p.port)
	if err != nil {
		t.Fatalf("postgres restart: %v", err)
	}
	p.cmd, p.done = q.cmd, q.done
}
