package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Write amplification is measured on the block device under the run
// directory, from the sectors it reports written in /proc/diskstats (field
// 10 of a device's line), never from /proc/<pid>/io, whose write_bytes
// over-reports on some kernels. The figure is device-wide: anything else
// writing to the same device during a cell counts too.

// sectorSize is the unit of /proc/diskstats, whatever the device's own
// sector size.
const sectorSize = 512

// diskstatsLine is one parsed line of /proc/diskstats.
type diskstatsLine struct {
	Major, Minor   uint32
	Name           string
	SectorsWritten uint64
}

// parseDiskstatsLine parses one line of /proc/diskstats:
//
//	254       0 vda 1130695 360828 516003930 3628235 3385280 302019 520173176 ...
//
// Fields 1–3 are major, minor and name; field 10 is sectors written.
func parseDiskstatsLine(line string) (diskstatsLine, error) {
	f := strings.Fields(line)
	if len(f) < 10 {
		return diskstatsLine{}, fmt.Errorf("diskstats: %d fields, want at least 10: %q", len(f), line)
	}
	major, err1 := strconv.ParseUint(f[0], 10, 32)
	minor, err2 := strconv.ParseUint(f[1], 10, 32)
	sectors, err3 := strconv.ParseUint(f[9], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return diskstatsLine{}, fmt.Errorf("diskstats: not a device line: %q", line)
	}
	return diskstatsLine{Major: uint32(major), Minor: uint32(minor), Name: f[2], SectorsWritten: sectors}, nil
}

// findDiskstats returns the line of /proc/diskstats text for major:minor.
func findDiskstats(text string, major, minor uint32) (diskstatsLine, error) {
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		d, err := parseDiskstatsLine(line)
		if err != nil {
			return diskstatsLine{}, err
		}
		if d.Major == major && d.Minor == minor {
			return d, nil
		}
	}
	return diskstatsLine{}, fmt.Errorf("device %d:%d not in /proc/diskstats", major, minor)
}

// devCounter reads the bytes one block device has written; nil when the
// device could not be resolved (Reason says why).
type devCounter struct {
	major, minor uint32
	name         string
}

// String names the device for the table: "vda (254:0)".
func (d *devCounter) String() string { return fmt.Sprintf("%s (%d:%d)", d.name, d.major, d.minor) }

// amplification is one cell's device bytes against its payload bytes.
type amplification struct {
	Device       string  `json:"device,omitempty"`
	DeviceBytes  uint64  `json:"device_bytes"`
	PayloadBytes uint64  `json:"payload_bytes"`
	Ratio        float64 `json:"ratio"`        // 0 when not measured
	NA           string  `json:"na,omitempty"` // why not measured
}

// waMeter measures one cell: start before, finish after.
type waMeter struct {
	dev   *devCounter
	na    string
	start uint64
	// mid and midPayload are the device counter and the payload bytes at
	// markMid; midSet says markMid read the counter.
	mid, midPayload uint64
	midSet          bool
	end             uint64 // the counter at finish
}

// markMid reads the device counter in the middle of a cell, without a
// sync (which would stall the cell): finishSecondHalf then measures from
// here. Writeback of what was written before the mark lands after it, so
// the second half's figure errs high, never low. Not safe for concurrent
// use with finish.
func (m *waMeter) markMid(payload uint64) {
	if m.dev == nil {
		return
	}
	b, err := m.dev.bytesWritten()
	if err != nil {
		return
	}
	m.mid, m.midPayload, m.midSet = b, payload, true
}

// startWA syncs every filesystem (so that earlier cells' writeback does not
// land in this one) and reads the device's counter.
func startWA(dev *devCounter, na string) *waMeter {
	m := &waMeter{dev: dev, na: na}
	if dev == nil {
		return m
	}
	syncAll()
	b, err := dev.bytesWritten()
	if err != nil {
		m.dev, m.na = nil, err.Error()
		return m
	}
	m.start = b
	return m
}

// finish syncs again and returns the device bytes written since start
// against payload bytes.
func (m *waMeter) finish(payload uint64) amplification {
	a := amplification{PayloadBytes: payload, NA: m.na}
	if m.dev == nil {
		return a
	}
	syncAll()
	b, err := m.dev.bytesWritten()
	if err != nil {
		a.NA = err.Error()
		return a
	}
	a.Device, a.DeviceBytes = m.dev.String(), b-m.start
	if payload > 0 {
		a.Ratio = float64(a.DeviceBytes) / float64(payload)
	}
	m.end = b
	return a
}

// secondHalf returns the write amplification from markMid to finish (call
// it after finish), or a zero Ratio with NA saying why there is none.
func (m *waMeter) secondHalf(payload uint64) amplification {
	a := amplification{NA: m.na}
	if m.dev == nil || !m.midSet || m.end == 0 || payload <= m.midPayload {
		if a.NA == "" {
			a.NA = "no mid-cell reading"
		}
		return a
	}
	a.Device, a.DeviceBytes, a.PayloadBytes = m.dev.String(), m.end-m.mid, payload-m.midPayload
	a.Ratio = float64(a.DeviceBytes) / float64(a.PayloadBytes)
	return a
}
