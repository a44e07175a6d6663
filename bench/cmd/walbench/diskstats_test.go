package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A /proc/diskstats excerpt (kernel 6.x: 20 fields).
const diskstatsSample = `   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 1130695 360828 516003930 3628235 3385280 302019 520173176 1797782 0 1124820 6053908 230934 39 415443440 143018 1206517 484871
 254       1 vda1 1130000 360000 516000000 3628000 3385000 302000 520170000 1797000 0 1124000 6053000 230000 39 415443000 143000 0 0
 253       0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
`

func TestParseDiskstats(t *testing.T) {
	d, err := parseDiskstatsLine(" 254       0 vda 1130695 360828 516003930 3628235 3385280 302019 520173176 1797782 0 1124820 6053908")
	require.NoError(t, err)
	assert.Equal(t, diskstatsLine{Major: 254, Minor: 0, Name: "vda", SectorsWritten: 520173176}, d,
		"field 10 is sectors written, not field 6 (sectors read) or 7")

	d, err = findDiskstats(diskstatsSample, 254, 1)
	require.NoError(t, err)
	assert.Equal(t, "vda1", d.Name, "the partition")
	assert.Equal(t, uint64(520170000), d.SectorsWritten)
	d, err = findDiskstats(diskstatsSample, 254, 0)
	require.NoError(t, err)
	assert.Equal(t, "vda", d.Name, "the whole disk")

	_, err = findDiskstats(diskstatsSample, 8, 0)
	assert.ErrorContains(t, err, "8:0 not in /proc/diskstats")
	for _, bad := range []string{"254 0 vda 1 2 3", "x 0 vda 1 2 3 4 5 6 7 8", "254 0 vda 1 2 3 4 5 6 -7 8"} {
		_, err := parseDiskstatsLine(bad)
		assert.Error(t, err, bad)
	}
}
