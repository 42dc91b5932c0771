package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runRow runs sealer-proxy in front of up's answers of kind, with n slow
// readers for f.hold, and returns what it measured.
func runRow(ctx context.Context, f flags, up *upstream, kind string, n int) (*row, error) {
	p, err := startProxy(f, up.url(kind))
	if err != nil {
		return nil, err
	}
	defer p.stop()
	r := &row{bufferedPeak: -1}
	// One call first, so that the memory at start is that of a proxy that
	// has served.
	if _, err := normalCall(ctx, p.url); err != nil {
		return nil, fmt.Errorf("a first call through the proxy: %v", err)
	}
	if r.rssStart, err = rss(p.pid); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.hold)
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { slowReader(ctx, p.addr, f.rate, f.size, r) })
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			took, err := normalCall(ctx, p.url)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				r.normalFailed++
			default:
				r.normal = append(r.normal, took)
			}
			sleep(ctx, 200*time.Millisecond)
		}
	})
	for tick := time.NewTicker(time.Second); ctx.Err() == nil; <-tick.C {
		if b, err := rss(p.pid); err == nil {
			r.rssPeak, r.rssEnd = max(r.rssPeak, b), b
		}
		if m, err := p.metrics(); err == nil && m.buffered >= 0 {
			r.bufferedPeak = max(r.bufferedPeak, m.buffered)
		}
	}
	if m, err := p.metrics(); err == nil {
		r.cut, r.dropped = m.cut, m.dropped
	}
	cancel()
	wg.Wait()
	return r, nil
}

// slowReader calls tool "big" and reads the answer at rate bytes a second,
// 1 KiB at a time, until it ends; then again, until ctx is done. After an
// answer refused, or one that ended before its size (cut off, or an error
// in place of the event), it waits a second before it calls again.
func slowReader(ctx context.Context, addr string, rate, size int, r *row) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{}}}`
	var d net.Dialer
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(bufio.NewReaderSize(c, 1<<10), nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			buf, read := make([]byte, 1<<10), 0
			for ctx.Err() == nil {
				n, err := io.ReadFull(resp.Body, buf)
				if read += n; err != nil {
					break
				}
				sleep(ctx, time.Duration(len(buf))*time.Second/time.Duration(rate))
			}
			switch {
			case ctx.Err() != nil:
			case read >= size:
				r.whole.Add(1)
			default:
				r.short.Add(1)
				sleep(ctx, time.Second)
			}
		} else if err == nil {
			r.refused.Add(1)
			sleep(ctx, time.Second)
		}
		stop()
		c.Close()
	}
}

// normalCall calls a tool whose answer is small and returns how long the
// answer took.
func normalCall(ctx context.Context, url string) (time.Duration, error) {
	const body = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"small","arguments":{}}}`
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"text":"ok"`) {
		return 0, fmt.Errorf("HTTP %d: %.200s (%v)", resp.StatusCode, got, err)
	}
	return took, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// proxy is a sealer-proxy process this tool started.
type proxy struct {
	cmd              *exec.Cmd
	pid              int
	addr, url, admin string
}

var listening = regexp.MustCompile(`"msg":"listening","addr":"([^"]+)","admin":"([^"]+)"`)

func startProxy(f flags, upstream string) (*proxy, error) {
	args := append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--upstream", upstream,
		"--sealer", "127.0.0.1:1", "--principal", "anonymous", "--audience", "slowread", "--log-level", "info"}, f.proxyFlags...)
	cmd := exec.Command(f.proxy, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proxy{cmd: cmd, pid: cmd.Process.Pid}
	lines := bufio.NewScanner(stderr)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			p.addr, p.admin = m[1], m[2]
			break
		}
	}
	if p.addr == "" {
		p.stop()
		return nil, fmt.Errorf("%s did not start: %v", filepath.Base(f.proxy), lines.Err())
	}
	go io.Copy(io.Discard, stderr) // its warnings, one per answer dropped
	p.url = "http://" + p.addr + "/mcp"
	return p, nil
}

// stop ends the proxy: SIGTERM, then SIGKILL past its 10 s of draining.
func (p *proxy) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// proxyMetrics are the figures read from the proxy's /metrics.
type proxyMetrics struct {
	buffered     int64 // -1: not exported
	cut, dropped float64
}

func (p *proxy) metrics() (proxyMetrics, error) {
	m := proxyMetrics{buffered: -1}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.admin + "/metrics")
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			continue
		}
		switch {
		// The metric's name before issue 50: request bodies only.
		case strings.HasPrefix(name, "sealer_proxy_buffered_bytes{"), name == "sealer_proxy_buffered_request_bytes":
			m.buffered = max(m.buffered, 0) + int64(v)
		case name == "sealer_proxy_write_timeouts_total":
			m.cut = v
		case strings.HasPrefix(name, "sealer_proxy_requests_total{") && strings.Contains(name, `outcome="answer_overloaded"`):
			m.dropped += v
		}
	}
	return m, sc.Err()
}

// rss returns the resident memory of process pid.
func rss(pid int) (int64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
