package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// 100 on Linux.
const clockTick = 10 * time.Millisecond

// cpuTime returns the CPU time a process has used (user and system).
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	end := strings.LastIndexByte(string(data), ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(data[end+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// cpuDuring measures the CPU time pid uses in the measured window of a run
// that starts now: after warmup, for dur. The returned function waits for
// the window to end and returns the time (0 when pid is 0 or unreadable).
func cpuDuring(pid int, warmup, dur time.Duration) func() time.Duration {
	if pid == 0 {
		return func() time.Duration { return 0 }
	}
	done := make(chan time.Duration, 1)
	go func() {
		time.Sleep(warmup)
		before, err := cpuTime(pid)
		time.Sleep(dur)
		after, err2 := cpuTime(pid)
		if err != nil || err2 != nil {
			done <- 0
			return
		}
		done <- after - before
	}()
	return func() time.Duration { return <-done }
}
