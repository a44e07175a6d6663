package main

import (
	"bufio"
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWriteCommand(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := writeCommand(w, "SET", []byte("k:1:2"), 1000); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if want := "*3\r\n$3\r\nSET\r\n$5\r\nk:1:2\r\n$4\r\n1000\r\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	if err := writeCommand(w, "SET", 1.5); err == nil {
		t.Fatal("a float is not a RESP argument")
	}
}

func TestReadReply(t *testing.T) {
	for in, want := range map[string]any{
		"+OK\r\n":           "OK",
		":-42\r\n":          int64(-42),
		"$5\r\nhe\r\no\r\n": []byte("he\r\no"),
		"$0\r\n\r\n":        []byte{},
		"$-1\r\n":           nil,
		"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$-1\r\n": []any{[]byte("0"), []any{[]byte("a"), nil}},
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(in)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v %v, want %#v", in, got, err, want)
		}
	}
	_, err := readReply(bufio.NewReader(strings.NewReader("-LOADING Redis is loading the dataset in memory\r\n")))
	var re respError
	if !errors.As(err, &re) || !strings.HasPrefix(string(re), "LOADING") {
		t.Errorf("an error reply: %v", err)
	}
	for _, in := range []string{"", "+OK\n", "?x\r\n", ":x\r\n", "$-2\r\n", "$5\r\nab\r\n", "$2\r\nabcd", "*2\r\n+a\r\n", "$99999999999\r\n"} {
		if got, err := readReply(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("%q: want an error, got %#v", in, got)
		}
	}
}

// TestRESPAgainstRedis runs the guest's client against the installed
// redis-server (skipped when there is none): the commands the guest uses,
// with binary values.
func TestRESPAgainstRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install -y redis-server)")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var c *respConn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err = dialRedis(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	defer c.close()
	if s, err := replyString(c.do("PING")); err != nil || s != "PONG" {
		t.Fatalf("PING: %q %v", s, err)
	}
	val := make([]byte, payloadLen)
	payload(val, 2, 7, 123)
	for i := range 3 {
		if s, err := replyString(c.do("SET", redisKey(2, uint64(i)), val)); err != nil || s != "OK" {
			t.Fatalf("SET: %q %v", s, err)
		}
	}
	reply, err := c.do("SCAN", "0", "COUNT", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if v := reply.([]any); len(v) != 2 || len(v[1].([]any)) != 3 {
		t.Fatalf("SCAN: %#v", reply)
	}
	reply, err = c.do("MGET", redisKey(2, 1), "k:9:9")
	if err != nil {
		t.Fatal(err)
	}
	vals := reply.([]any)
	if len(vals) != 2 || !bytes.Equal(vals[0].([]byte), val) || vals[1] != nil {
		t.Fatalf("MGET: %#v", reply)
	}
	if _, err := c.do("NOSUCHCOMMAND"); !errors.As(err, new(respError)) {
		t.Fatalf("an unknown command: %v", err)
	}
}
