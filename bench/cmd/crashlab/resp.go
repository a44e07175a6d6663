package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
)

// The guest's Redis client: the RESP2 protocol over a Unix socket, opened
// with the socket system calls rather than package net. The lab's binary is
// also the guest's init and must be statically linked, and a program that
// imports net links the C library's resolver whenever cgo is enabled; a
// Redis client library would import net. The guest needs four commands
// (PING, SET, SCAN, MGET), one request in flight at a time.

// respConn is one connection to a Redis server. Not safe for concurrent use.
type respConn struct {
	f *os.File
	r *bufio.Reader
	w *bufio.Writer
}

// respError is an error reply (-ERR …, -LOADING …).
type respError string

func (e respError) Error() string { return string(e) }

// dialRedis connects to the server listening on the Unix socket path.
func dialRedis(path string) (*respConn, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("connect %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	return &respConn{f: f, r: bufio.NewReader(f), w: bufio.NewWriter(f)}, nil
}

func (c *respConn) close() error { return c.f.Close() }

// do sends one command and returns its reply: a string (simple string), an
// int64, a []byte (bulk string; nil for a null bulk), or a []any (array).
// An error reply is returned as a respError.
func (c *respConn) do(args ...any) (any, error) {
	if err := writeCommand(c.w, args...); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	return readReply(c.r)
}

// writeCommand writes args as a RESP array of bulk strings; each is a
// string, a []byte or an integer.
func writeCommand(w *bufio.Writer, args ...any) error {
	fmt.Fprintf(w, "*%d\r\n", len(args))
	for _, a := range args {
		var b []byte
		switch v := a.(type) {
		case string:
			b = []byte(v)
		case []byte:
			b = v
		case int:
			b = strconv.AppendInt(nil, int64(v), 10)
		default:
			return fmt.Errorf("resp: cannot send a %T", a)
		}
		fmt.Fprintf(w, "$%d\r\n", len(b))
		w.Write(b)
		w.WriteString("\r\n")
	}
	return nil
}

// maxBulk bounds a bulk string or array length read from the server.
const maxBulk = 512 << 20

// readReply reads one reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("resp: malformed line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("resp: integer %q", body)
		}
		return n, nil
	case '$', '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxBulk {
			return nil, fmt.Errorf("resp: length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		if kind == '$' {
			b := make([]byte, n+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, err
			}
			if b[n] != '\r' || b[n+1] != '\n' {
				return nil, errors.New("resp: bulk string not ended by CRLF")
			}
			return b[:n], nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("resp: unknown reply type %q", kind)
}

// replyString is reply as a simple or bulk string.
func replyString(reply any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	switch v := reply.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	}
	return "", fmt.Errorf("resp: want a string, got %T", reply)
}
