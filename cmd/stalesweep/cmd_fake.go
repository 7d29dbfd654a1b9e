package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"cloud.google.com/go/run/apiv2/runpb"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
)

func cmdFakeCloudRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fake-cloudrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "loopback host:port to serve on")
	file := fs.String("executions", "", "JSON array of google.cloud.run.v2.Execution in protobuf JSON form")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitInvalid
	}
	var execs []*runpb.Execution
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			fmt.Fprintf(stderr, "stalesweep fake-cloudrun: %v\n", err)
			return exitInvalid
		}
		execs, err = cloudrunfake.LoadExecutions(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "stalesweep fake-cloudrun: %s: %v\n", *file, err)
			return exitInvalid
		}
	}
	srv, err := cloudrunfake.Listen(*addr)
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep fake-cloudrun: %v\n", err)
		return exitInvalid
	}
	defer srv.Close()
	for _, e := range execs {
		if err := srv.SetExecution(e); err != nil {
			fmt.Fprintf(stderr, "stalesweep fake-cloudrun: %v\n", err)
			return exitInvalid
		}
	}
	fmt.Fprintf(stdout, "fake Cloud Run Executions on %s with %d executions\nexport STALESWEEP_CLOUD_RUN_ENDPOINT=%s\n",
		srv.Addr, len(execs), srv.Addr)
	<-ctx.Done()
	return exitOK
}
