package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// refuseRepeatedFlags makes every single-valued flag of every command under root refuse a second
// value: pflag keeps the last one given, so `pause T --scope A --scope B` would pause only B and
// say nothing of A. A flag that collects values (a slice, an array, a count, a map) is left as it
// is. The refusal is a flag error: cobra says it and the command exits 2, naming the flag.
func refuseRepeatedFlags(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{cmd.LocalNonPersistentFlags(), cmd.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if _, done := f.Value.(onceMarker); done || collects(f.Value.Type()) {
					return
				}
				once := &onceValue{Value: f.Value, name: f.Name}
				if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
					f.Value = &onceBool{once}
					return
				}
				f.Value = once
			})
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// collects reports whether a flag of pflag type typ takes many values.
func collects(typ string) bool {
	return strings.HasSuffix(typ, "Slice") || strings.HasSuffix(typ, "Array") || typ == "count" || strings.HasPrefix(typ, "stringTo")
}

// onceMarker is what a wrapped flag value has, so that a flag shared by two commands is wrapped
// once.
type onceMarker interface{ once() }

// onceValue is a flag value that takes one value: a second Set is an error naming the flag.
type onceValue struct {
	pflag.Value
	name  string
	first string
	set   bool
}

func (v *onceValue) once() {}

func (v *onceValue) Set(s string) error {
	if v.set {
		return fmt.Errorf("--%s given twice (%q, then %q): it takes one value", v.name, v.first, s)
	}
	if err := v.Value.Set(s); err != nil {
		return err
	}
	v.set, v.first = true, s
	return nil
}

// onceBool is onceValue for a boolean flag, which may be given without a value.
type onceBool struct{ *onceValue }

func (b *onceBool) IsBoolFlag() bool { return true }
