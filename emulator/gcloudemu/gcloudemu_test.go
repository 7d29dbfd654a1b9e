package gcloudemu

import (
	"context"
	"net"
	"testing"
)

func TestFirestoreStartsAndStopsItsWholeProcessGroup(t *testing.T) {
	if testing.Short() { // not testenv.Need: testenv imports this package
		t.Skip("needs the Google Cloud CLI (gcloud) and its Firestore emulator: not in the -short tier")
	}
	emu, err := Firestore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !emu.proc.Alive() {
		t.Fatal("the emulator's process group is not alive after start")
	}
	conn, err := net.Dial("tcp", emu.Host)
	if err != nil {
		t.Fatalf("emulator not listening on %s: %v", emu.Host, err)
	}
	conn.Close()
	if err := emu.Stop(); err != nil {
		t.Fatal(err)
	}
	if emu.proc.Alive() {
		t.Error("a process of the emulator's group outlived Stop")
	}
	if conn, err := net.Dial("tcp", emu.Host); err == nil {
		conn.Close()
		t.Errorf("something still listens on %s after Stop", emu.Host)
	}
	if err := emu.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}
