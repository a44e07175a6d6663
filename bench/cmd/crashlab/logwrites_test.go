package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

func sectorOf(b byte, n int) []byte { return bytes.Repeat([]byte{b}, 512*n) }

func marker(k uint64, counts ...uint64) []byte {
	m := make([]byte, markerLen)
	binary.LittleEndian.PutUint64(m, markerMagic)
	binary.LittleEndian.PutUint64(m[8:], k)
	binary.LittleEndian.PutUint64(m[16:], 1000+k)
	binary.LittleEndian.PutUint64(m[24:], uint64(len(counts)))
	for g, c := range counts {
		binary.LittleEndian.PutUint64(m[32+8*g:], c)
	}
	return m
}

// TestStream writes a log-writes log, reads it back, cuts it into windows
// at its flushes, and builds states from it.
func TestStream(t *testing.T) {
	mk := uint64(plFsBytes / 512)
	es := []lwEntry{
		{Sector: 0, NrSectors: 1, Data: sectorOf(1, 1)},
		{Flags: lwFlush},
		{Sector: mk, NrSectors: 1, Data: marker(1, 3, 4)},
		{Sector: 2, NrSectors: 2, Data: sectorOf(2, 2)},
		{Sector: 8, NrSectors: 1, Data: sectorOf(3, 1)},
		{Sector: mk + 1, NrSectors: 1, Data: marker(2, 5, 6)},
		{Flags: lwFlush},
		{Sector: 4, NrSectors: 4, Data: sectorOf(4, 4)},
	}
	path := filepath.Join(t.TempDir(), "log")
	var buf bytes.Buffer
	if err := writeLogWrites(&buf, 512, es); err != nil {
		t.Fatal(err)
	}
	buf.Write(make([]byte, 512)) // a zeroed sector ends the log
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := loadStream(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.entries) != len(es) || st.flushes != 2 || len(st.wins) != 3 {
		t.Fatalf("%d entries, %d flushes, %d windows; want %d, 2, 3", len(st.entries), st.flushes, len(st.wins), len(es))
	}
	if w := st.wins[1]; len(w.Writes) != 2 || w.Marker == nil || binary.LittleEndian.Uint64(w.Marker[8:]) != 2 {
		t.Errorf("window 1: writes %v, marker %v; want 2 writes and marker 2", w.Writes, w.Marker != nil)
	}
	if st.wins[0].Marker != nil || st.wins[2].Marker == nil {
		t.Errorf("window 0 has a marker or window 2 none")
	}
	img := make([]byte, 16*512)
	for _, i := range st.wins[0].Writes {
		st.apply(img, i, nil)
	}
	full := bytes.Clone(img)
	st.build(full, plState{Win: 1, Kind: "all"})
	if full[2*512] != 2 || full[8*512] != 3 || full[0] != 1 {
		t.Errorf("all: sectors 0, 2, 8 hold %d %d %d; want 1 2 3", full[0], full[2*512], full[8*512])
	}
	none := bytes.Clone(img)
	st.build(none, plState{Win: 1, Kind: "none"})
	if !bytes.Equal(none, img) {
		t.Error("none changed the image")
	}
	// Torn states keep whole sectors only, each either old or new, and the
	// same seed builds the same image.
	for seed := range uint64(20) {
		a, b := bytes.Clone(img), bytes.Clone(img)
		st.build(a, plState{Win: 2, Kind: "torn", Seed: seed})
		st.build(b, plState{Win: 2, Kind: "torn", Seed: seed})
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d built two images", seed)
		}
		for s := 0; s < 16; s++ {
			sec := a[s*512 : (s+1)*512]
			if !bytes.Equal(sec, bytes.Repeat(sec[:1], 512)) {
				t.Fatalf("seed %d: sector %d torn within", seed, s)
			}
		}
	}
	if got := st.pick(3, 7); len(got) != 3 || got[len(got)-1].Win != 2 {
		t.Errorf("pick(3): %v", got)
	}
	// The super block's count is a lower bound: QEMU updates it at flushes.
	cut := bytes.Clone(buf.Bytes()[:buf.Len()-512-100])
	binary.LittleEndian.PutUint64(cut[16:], 6)
	os.WriteFile(path, cut, 0o644)
	if st, err := loadStream(path); err != nil || len(st.entries) != 7 {
		t.Errorf("a log cut within its last entry: %v", err)
	}
	binary.LittleEndian.PutUint64(cut[16:], 8)
	os.WriteFile(path, cut, 0o644)
	if _, err := loadStream(path); err == nil {
		t.Error("a log shorter than its super block's count was accepted")
	}
}

func TestRequiredTrial(t *testing.T) {
	work := make([]byte, shmSize)
	binary.LittleEndian.PutUint64(work[hdrGorout:], 2)
	binary.LittleEndian.PutUint64(work[hdrStartNs:], 5)
	rs := regionSize(2)
	for g := range 2 {
		base := ackBase + g*rs
		binary.LittleEndian.PutUint64(work[base:], 10)
		for seq := range 10 {
			e := base + entryBase + seq*32
			binary.LittleEndian.PutUint64(work[e:], uint64(g*100+seq))
			binary.LittleEndian.PutUint64(work[e+8:], uint64(seq))
			binary.LittleEndian.PutUint64(work[e+24:], uint64(g))
		}
	}
	tr := requiredTrial("p", work, marker(9, 3, 4))
	if len(tr.AckCounts) != 2 || tr.AckCounts[0] != 3 || tr.AckCounts[1] != 4 || len(tr.Acks) != 7 || tr.CrashNs != 1009 {
		t.Errorf("counts %v, %d acks, crash %d; want [3 4], 7, 1009", tr.AckCounts, len(tr.Acks), tr.CrashNs)
	}
	tr = requiredTrial("p", work, nil)
	if tr.AckCounts[0] != 0 || len(tr.Acks) != 0 || tr.CrashNs != 5 {
		t.Errorf("no marker: counts %v, %d acks, crash %d", tr.AckCounts, len(tr.Acks), tr.CrashNs)
	}
}
