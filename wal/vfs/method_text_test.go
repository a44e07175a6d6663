package vfs_test

import (
	"encoding/json"
	"flag"
	"testing"

	"github.com/durawal/durawal/wal/vfs"
)

func TestSyncMethodText(t *testing.T) {
	type config struct {
		Method vfs.SyncMethod `json:"method"`
	}
	for _, m := range vfs.SyncMethods() {
		b, err := json.Marshal(config{m})
		if err != nil || string(b) != `{"method":"`+m.String()+`"}` {
			t.Fatalf("Marshal(%v) = %s, %v", m, b, err)
		}
		var c config
		c.Method = vfs.Fsync + 1 // not m's zero, to see it is set
		if err := json.Unmarshal(b, &c); err != nil || c.Method != m {
			t.Fatalf("Unmarshal(%s) = %v, %v", b, c.Method, err)
		}
	}
	var c config
	if err := json.Unmarshal([]byte(`{"method":"o_direct+o_dsync"}`), &c); err != nil || c.Method != vfs.ODirectODsync {
		t.Fatalf("lower case with +: %v, %v", c.Method, err)
	}
	c.Method = vfs.Fsync
	if err := json.Unmarshal([]byte(`{"method":"fsync_writethrough"}`), &c); err == nil || c.Method != vfs.Fsync {
		t.Fatalf("bad name: %v, %v", c.Method, err)
	}
	if _, err := vfs.SyncMethod(200).MarshalText(); err == nil {
		t.Fatal("undefined method marshaled")
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var m vfs.SyncMethod
	fs.TextVar(&m, "sync-method", vfs.Fdatasync, "")
	if err := fs.Parse([]string{"-sync-method=O_DSYNC"}); err != nil || m != vfs.ODsync {
		t.Fatalf("flag: %v, %v", m, err)
	}
}
