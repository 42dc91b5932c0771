package nemesis

import (
	"math/rand/v2"
	"slices"
	"time"
)

// The kinds of fault the nemesis injects.
const (
	PartitionSealerMaster = "partition-sealer-master" // one sealer cut from one master
	MinorityMaster        = "minority-master"         // a master and one sealer cut from the rest
	HalfSplit             = "half-split"              // a master, another's replica, two sealers | the rest
	PauseMaster           = "pause-master"            // SIGSTOP past cluster-node-timeout, then SIGCONT
	PauseSealer           = "pause-sealer"
	KillMaster            = "kill-master" // SIGKILL, then a restart on its own data
	KillSealer            = "kill-sealer"
	ClockSkew             = "clock-skew" // one sealer's wall clock off by twice --skew, then back
)

// Kinds are every kind of fault, in a fixed order.
var Kinds = []string{PartitionSealerMaster, MinorityMaster, HalfSplit, PauseMaster, PauseSealer, KillMaster, KillSealer, ClockSkew}

// Step is one fault of a schedule. Its targets are chosen when it is
// injected, from Picks, because which nodes are masters then depends on
// the failovers before it.
type Step struct {
	Kind  string
	Picks [3]int        // random numbers that choose the targets
	Sign  int           // +1 or -1: the direction of a clock skew
	Hold  time.Duration // how long the fault lasts
	Gap   time.Duration // the quiet time after its heal
}

// Schedule is a seeded sequence of faults: every kind once, in a random
// order, then again in another, so that a short run sees each kind.
type Schedule struct {
	rng   *rand.Rand
	kinds []string
	bag   []string
}

// NewSchedule returns the schedule of seed over kinds; the same seed and
// kinds give the same steps.
func NewSchedule(seed uint64, kinds []string) *Schedule {
	return &Schedule{rng: rand.New(rand.NewPCG(seed, 34)), kinds: slices.Clone(kinds)}
}

// Next returns the next step.
func (s *Schedule) Next() Step {
	if len(s.bag) == 0 {
		s.bag = slices.Clone(s.kinds)
		s.rng.Shuffle(len(s.bag), func(i, j int) { s.bag[i], s.bag[j] = s.bag[j], s.bag[i] })
	}
	st := Step{Kind: s.bag[0], Sign: 1}
	s.bag = s.bag[1:]
	for i := range st.Picks {
		st.Picks[i] = s.rng.IntN(1 << 20)
	}
	if s.rng.IntN(2) == 0 {
		st.Sign = -1
	}
	// Pauses and partitions outlast cluster-node-timeout (2s) so that the
	// cluster fails the node over; kills are healed by a restart.
	st.Hold = time.Duration(4000+s.rng.IntN(4000)) * time.Millisecond
	st.Gap = time.Duration(1500+s.rng.IntN(2500)) * time.Millisecond
	return st
}
