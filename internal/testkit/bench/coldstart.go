package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"
)

// measureColdStart starts this binary's functions server (`serve`) several times and times each
// start to its first answered request; the dependencies are built on that first request, as on
// the platform.
func measureColdStart(ctx context.Context, p *progress, sz sizes, res *Result) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return err
	}
	res.BinaryBytes = fi.Size()
	var ms []float64
	for range sz.coldStarts {
		d, err := coldStart(ctx, exe)
		if err != nil {
			return err
		}
		ms = append(ms, float64(d.Microseconds())/1000)
	}
	slices.Sort(ms)
	res.ColdStartMs = ms[len(ms)/2]
	p.say("%s (%d bytes): start to first request, median of %d: %.1f ms", exe, res.BinaryBytes, len(ms), res.ColdStartMs)
	return nil
}

func coldStart(ctx context.Context, exe string) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "serve", "--addr", "127.0.0.1:"+strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "STALESWEEP_AUTH=off", "FUNCTION_TARGET=")
	url := fmt.Sprintf("http://127.0.0.1:%d/StartWorkflow", port)
	client := &http.Client{Timeout: time.Second}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	// Poll every 2 ms (the figure's resolution) rather than spin, which would take the CPU
	// the starting server needs.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for time.Since(begin) < 30*time.Second {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			return time.Since(begin), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
	return 0, fmt.Errorf("the functions server did not answer within 30 s")
}
