package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/stalesweep/stalesweep/functions" // registers the targets
)

func cmdServe(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defAddr := "127.0.0.1:" + firstNonEmpty(os.Getenv("PORT"), "8080")
	addr := fs.String("addr", defAddr, "host:port to serve on (every target at /TARGET; FUNCTION_TARGET=X serves only X at /)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitInvalid
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep serve: --addr %q: %v\n", *addr, err)
		return exitInvalid
	}
	fmt.Fprintf(stderr, "stalesweep serve: functions on http://%s (FIRESTORE_EMULATOR_HOST=%q, %s=%q)\n",
		*addr, os.Getenv("FIRESTORE_EMULATOR_HOST"), "STALESWEEP_CLOUD_RUN_ENDPOINT", os.Getenv("STALESWEEP_CLOUD_RUN_ENDPOINT"))
	errc := make(chan error, 1)
	go func() { errc <- funcframework.StartHostPort(host, port) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "stalesweep serve: %v\n", err)
		return exitFailed
	case <-ctx.Done():
		return exitOK
	}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
