package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// runRepair is waldump -repair: what wal.Repair would do to the log in dir
// (wal.PlanRepair, which changes nothing), or with apply what it did. Exit
// status 0 when the log needs no repair or was repaired (or, in a dry run,
// can be), 1 when it cannot be, 2 for an error that is not about the log.
func runRepair(dir string, apply bool, stdout, stderr io.Writer) int {
	var rep wal.RepairReport
	var err error
	if apply {
		rep, err = wal.Repair(dir, wal.Options{})
	} else {
		rep, err = wal.PlanRepair(dir, wal.Options{})
	}
	if rep.Needed {
		fmt.Fprintf(stdout, "damage: %v\n", rep.Damage)
		k := rep.Kept
		fmt.Fprintf(stdout, "keeps: LSN %d to %d: %d records (%d bytes)\n", k.Start, k.Stop, k.Records, k.Bytes)
		for _, n := range k.Notes {
			fmt.Fprintf(stdout, "note: %s\n", n)
		}
		fmt.Fprintf(stdout, "drops: LSN %d to %d: %d bytes into %d evidence files; %d valid records found among them (damaged frames are not countable)\n",
			rep.LostFrom, rep.LostTo, rep.LostBytes, len(rep.Evidence), rep.LostRecords)
		for _, r := range rep.Records {
			fmt.Fprintf(stdout, "record: %s is damaged; its bytes go to %s; replaced by: %s\n", r.Name, r.Copy, r.Replacement)
		}
		verb := "would"
		if apply {
			verb = "did"
		}
		for i, s := range rep.Steps {
			fmt.Fprintf(stdout, "repair %s: %d. %s\n", verb, i+1, s)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "waldump: %v\n", err)
		if errors.Is(err, vfs.ErrLocked) || errors.Is(err, wal.ErrNotRepaired) || errors.Is(err, wal.ErrForeignFile) || errors.Is(err, wal.ErrUnsupportedVersion) {
			return 1
		}
		return 2
	}
	switch {
	case !rep.Needed:
		fmt.Fprintln(stdout, "nothing to repair: Open (with VerifyOnOpen) accepts the log")
	case apply:
		fmt.Fprintf(stdout, "repaired: Open accepts the log; the dropped bytes are in %v; the report is %s\n", rep.Evidence, rep.ReportFile)
	default:
		fmt.Fprintln(stdout, "dry run: nothing was changed; run again with -apply to repair (with no process using the log)")
	}
	return 0
}
