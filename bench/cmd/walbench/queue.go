package main

import (
	"fmt"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/policy"
)

// queueResult answers one question with more commits than cliff gives it:
// does the default queue's adaptive merge wait cost p99 against the plain
// leader/follower queue? Not in the default run; -exp queue.
type queueResult struct {
	PerCommitter int     `json:"commits_per_committer"`
	Adaptive     []*cell `json:"adaptive"` // one per queueCommitters
	Plain        []*cell `json:"plain"`
}

var queueCommitters = []int{8, 16, 32}

// planQueue queues, at each committer count, the adaptive and the plain
// queue back to back, so that every round measures the pair together.
func planQueue(e *env, p *plan) *queueResult {
	each := e.cfg.counts.queuePerCommitter
	res := &queueResult{PerCommitter: each}
	pol := policy.SyncEveryCommit()
	for _, n := range queueCommitters {
		res.Adaptive = append(res.Adaptive, p.add(e, fmt.Sprintf("queue: adaptive, %s × %d commits", committers(n), each),
			spec{name: fmt.Sprintf("adaptive × %d", n), pol: pol, committers: n, each: each}))
		res.Plain = append(res.Plain, p.add(e, fmt.Sprintf("queue: plain, %s × %d commits", committers(n), each),
			spec{name: fmt.Sprintf("plain × %d", n), pol: pol, committers: n, each: each,
				gc: groupcommit.Options{DisableAdaptiveWait: true}}))
	}
	return res
}

// queueTables renders the comparison.
func queueTables(q *queueResult, rounds int) []table {
	t := compareQueues(fmt.Sprintf("queue — adaptive merge wait vs plain leader/follower at innodb=1, %s commits per committer",
		fmtInt(q.PerCommitter)), q.Adaptive, q.Plain, rounds)
	return []table{t}
}
