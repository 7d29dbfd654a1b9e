package main

import (
	"fmt"
	"os"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
)

func (c *cli) fakeCloudRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fake-cloudrun --addr HOST:PORT --executions FILE",
		Short: "serve the Cloud Run Executions fake",
		Long: `fake-cloudrun serves the project's gRPC fake of the Cloud Run Executions service on a
loopback address, loaded from a protobuf-JSON array of executions, until interrupted. Point
stalesweep at it with STALESWEEP_CLOUD_RUN_ENDPOINT.`,
		Example: `  stalesweep fake-cloudrun --addr 127.0.0.1:9090 --executions executions.json`,
		Args:    cobra.NoArgs,
	}
	addr := cmd.Flags().String("addr", "127.0.0.1:0", "loopback host:port to serve on")
	file := cmd.Flags().String("executions", "", "JSON array of google.cloud.run.v2.Execution in protobuf JSON form")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		fail := func(format string, args ...any) error {
			fmt.Fprintf(c.stderr, "stalesweep fake-cloudrun: "+format+"\n", args...)
			return exitCode(exitInvalid)
		}
		var execs []*runpb.Execution
		if *file != "" {
			f, err := os.Open(*file)
			if err != nil {
				return fail("%v", err)
			}
			execs, err = cloudrunfake.LoadExecutions(f)
			f.Close()
			if err != nil {
				return fail("%s: %v", *file, err)
			}
		}
		srv, err := cloudrunfake.Listen(*addr)
		if err != nil {
			return fail("%v", err)
		}
		defer srv.Close()
		for _, e := range execs {
			if err := srv.SetExecution(e); err != nil {
				return fail("%v", err)
			}
		}
		fmt.Fprintf(c.stdout, "fake Cloud Run Executions on %s with %d executions\nexport STALESWEEP_CLOUD_RUN_ENDPOINT=%s\n",
			srv.Addr, len(execs), srv.Addr)
		<-c.ctx.Done()
		return nil
	}
	return cmd
}
