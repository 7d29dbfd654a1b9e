package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/functions" // registers the targets
	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/auth"
)

func (c *cli) serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [--addr HOST:PORT]",
		Short: "serve the function targets locally (functions framework)",
		Long: `serve serves the function targets through the functions framework until interrupted: POST
/StartWorkflow, CloudEvents at /Dispatch, /Sweep, /SyncExecution, /ObserveExecution (FUNCTION_TARGET=X serves only X
at /). Every setting is checked first (a bad one exits 2 naming it); authentication off is
refused on any address but loopback.`,
		Example: `  STALESWEEP_AUTH=off stalesweep serve --addr 127.0.0.1:8080`,
		Args:    cobra.NoArgs,
	}
	addr := cmd.Flags().String("addr", "127.0.0.1:"+firstNonEmpty(os.Getenv("PORT"), "8080"), "host:port to serve on (every target at /TARGET; FUNCTION_TARGET=X serves only X at /)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return exit(serve(c.ctx, *addr, c.stderr))
	}
	return cmd
}

func serve(ctx context.Context, addr string, stderr io.Writer) int {
	host, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err == nil && (perr != nil || n < 0 || n > 65535) {
		err = fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep serve: --addr %q: %v\n", addr, err)
		return exitInvalid
	}
	// Every setting the served targets read is checked now, not on the first request.
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err == nil {
		err = functions.CheckEnv(os.Getenv)
	}
	if err == nil {
		err = checkAuthOffLoopback(cfg.Auth.Mode, host)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep serve: %v\n", err)
		return exitInvalid
	}
	fmt.Fprintf(stderr, "stalesweep serve: functions on http://%s (FIRESTORE_EMULATOR_HOST=%q PUBSUB_EMULATOR_HOST=%q %s=%q)\n",
		addr, os.Getenv("FIRESTORE_EMULATOR_HOST"), os.Getenv("PUBSUB_EMULATOR_HOST"), app.EnvCloudRunEndpoint, cfg.CloudRunEndpoint)
	switch cfg.Auth.Mode {
	case auth.ModeOff:
		fmt.Fprintln(stderr, "stalesweep serve: AUTHENTICATION IS OFF (STALESWEEP_AUTH=off): any caller may start workflows; for local use only")
	default:
		fmt.Fprintf(stderr, "stalesweep serve: StartWorkflow takes Google ID tokens for %v (gcloud's own: %t) from %v\n", cfg.Auth.Audiences, cfg.Auth.AcceptGcloud, cfg.Auth.Allowed)
	}
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

// checkAuthOffLoopback refuses authentication off on an address other hosts can reach: off is
// for a developer's own machine.
func checkAuthOffLoopback(mode, host string) error {
	if mode != auth.ModeOff {
		return nil
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("%s=off serves unauthenticated runs: only on a loopback address (127.0.0.1, ::1, localhost), not %q", app.EnvAuth, host)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
