package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// serverProc is a server process walbench started. Only its own PID is
// ever signalled: the servers run in the foreground (no daemonizing, no
// wrapper script), so that PID is the server.
type serverProc struct {
	name string
	cmd  *exec.Cmd
	log  string        // the file its stdout and stderr go to
	done chan struct{} // closed when it has exited
	err  error         // how it exited, once done is closed
}

// startProc starts path with args, its output appended to logPath. On
// Linux the child gets SIGTERM if walbench dies first.
func startProc(name, path string, args []string, logPath string) (*serverProc, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out.Close() // the child has its own copy
	p := &serverProc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid is the server's process ID.
func (p *serverProc) pid() int { return p.cmd.Process.Pid }

// exitErr returns why the server has exited, or nil while it runs.
func (p *serverProc) exitErr() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); the end of its log %s:\n%s", p.name, p.err, p.log, tailOf(p.log, 15))
	default:
		return nil
	}
}

// waitReady calls probe until it succeeds, the server exits, or limit
// passes.
func (p *serverProc) waitReady(ctx context.Context, limit time.Duration, probe func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := probe()
		if err == nil {
			return nil
		}
		if xerr := p.exitErr(); xerr != nil {
			return xerr
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; the end of its log %s:\n%s", p.name, limit, err, p.log, tailOf(p.log, 15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM (a clean shutdown for both servers), waits up to
// grace, then sends SIGKILL.
func (p *serverProc) stop(grace time.Duration) error {
	if p == nil || p.exitErr() != nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, grace)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailOf returns the last n lines of a file, indented, or why it cannot.
func tailOf(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	return "    " + strings.Join(lines, "\n    ")
}

// versionOf runs path with arg and returns the first line it prints.
func versionOf(path, arg string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, arg).Output()
	if err != nil {
		return "unknown version"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// lazyStart starts a server on its first use: a failed start is returned
// again on every later use, never retried.
type lazyStart struct {
	done bool
	err  error
}

// do runs start the first time it is called and returns its error then and
// every time after.
func (l *lazyStart) do(start func() error) error {
	if !l.done {
		l.done, l.err = true, start()
	}
	return l.err
}

// errNotInstalled marks a server whose binary is not on this machine.
var errNotInstalled = errors.New("not installed")
