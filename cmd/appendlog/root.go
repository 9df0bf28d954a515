package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // a command failed, or found damage
	exitUsage   = 2 // bad flags or arguments
)

// usageError marks an error as the caller's: the command line was wrong.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitError carries an exit status for an error whose message the command
// already printed.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes the command line args and returns the process exit status.
// It never panics: a panic in a command is reported as an internal error.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "appendlog: internal error (please report it): %v\n", r)
			code = exitFailure
		}
	}()
	// started is set once a command's RunE runs: any error before that
	// (unknown command or flag, bad flag value, wrong argument count) is a
	// usage error, whatever cobra's message.
	var started bool
	root := newRootCmd(&started)
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage()
		fmt.Fprintln(stderr, "appendlog: missing command")
		return exitUsage
	}
	out := &outWriter{w: stdout}
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	name := "appendlog"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	if err == nil {
		if werr := out.Err(); werr != nil {
			// Output the command printed without looking at the error
			// (a summary, a report) was lost: not a success.
			fmt.Fprintf(stderr, "%s: write output: %v\n", name, werr)
			return exitFailure
		}
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if cmd != nil && jsonAsked(cmd, args) && !out.Wrote() {
		// A command asked for --json that failed before it printed
		// anything (a bad command line, a setup that failed): stdout still
		// gets one JSON object, whose error is the message above.
		failed := map[string]any{"error": err.Error()}
		if cmd.Annotations[_jsonVerified] != "" {
			failed["verified"] = false
		}
		_ = json.NewEncoder(out).Encode(failed)
	}
	var ue *usageError
	if !started || errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		return exitUsage
	}
	return exitFailure
}

// _jsonVerified is the annotation of a command whose --json object always
// says whether the run verified: run's object for a failure that printed
// none then says "verified": false.
const _jsonVerified = "json-verified"

// jsonAsked reports whether the command line asks cmd for its --json
// output (a boolean flag; bench's --json names a file). A flag error stops
// parsing at the bad flag, so a --json after it is looked for in args.
func jsonAsked(cmd *cobra.Command, args []string) bool {
	fl := cmd.Flags().Lookup("json")
	if fl == nil || fl.Value.Type() != "bool" {
		return false
	}
	if fl.Changed {
		return fl.Value.String() == "true"
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" {
			return true
		}
		if v, ok := strings.CutPrefix(a, "--json="); ok {
			b, err := strconv.ParseBool(v)
			return err == nil && b
		}
	}
	return false
}

// outWriter is the commands' standard output. It keeps the first write
// error, so that output lost to a full disk or a closed file fails the
// command even where it printed with fmt.Fprintf and did not look.
type outWriter struct {
	w  io.Writer
	mu sync.Mutex
	// err is the first write error. Protected by mu.
	err error
	// wrote is set once any output was written.
	wrote atomic.Bool
}

func (o *outWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if n > 0 && !o.wrote.Load() {
		o.wrote.Store(true)
	}
	if err != nil {
		o.mu.Lock()
		if o.err == nil {
			o.err = err
		}
		o.mu.Unlock()
	}
	return n, err
}

// Wrote reports whether any output was written.
func (o *outWriter) Wrote() bool { return o.wrote.Load() }

// Err returns the first write error, or nil.
func (o *outWriter) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func newRootCmd(started *bool) *cobra.Command {
	root := &cobra.Command{
		Use:   "appendlog",
		Short: "Append records to files fast without losing or tearing one",
		Long: `appendlog drives and inspects appendlog write-ahead logs: a directory of
segment files (%020d.seg) holding checksummed, sequence-numbered records.

Exit status: 0 on success, 1 on failure or when damage is found, 2 on usage
errors.`,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetHelpCommand(newHelpCmd())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err}
	})
	cmds := []*cobra.Command{
		newBenchCmd(),
		newLoadCmd(),
		newVerifyCmd(),
		newDumpCmd(),
		newRepairCmd(),
		newShmCmd(started),
		newStatCmd(),
	}
	for _, f := range registered {
		cmds = append(cmds, f(started))
	}
	for _, c := range cmds {
		c.Args = usageArgs(c.Args)
		c.RunE = markStarted(started, c.RunE)
		root.AddCommand(c)
	}
	return root
}

// newHelpCmd is cobra's help command, but a topic that names no command
// is a usage error (exit status 2), where cobra's prints the usage and
// exits 0.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long: `help prints the help of any command: appendlog help COMMAND [SUBCOMMAND],
as appendlog COMMAND [SUBCOMMAND] --help does.`,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			switch {
			case err != nil:
				return &usageError{fmt.Errorf("unknown help topic %q: %w", strings.Join(args, " "), err)}
			case cmd == nil || len(rest) > 0:
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}

// registered holds the constructors of commands that add themselves with
// register from their own file's init, so that a new command touches no
// shared file.
var registered []func(started *bool) *cobra.Command

// register adds a command constructor; call it from an init function.
func register(f func(started *bool) *cobra.Command) { registered = append(registered, f) }

// markStarted wraps a RunE so that run can tell failures from usage errors.
func markStarted(started *bool, f func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		*started = true
		return f(cmd, args)
	}
}

// usageArgs wraps an argument validator so that its errors are usage errors.
func usageArgs(f cobra.PositionalArgs) cobra.PositionalArgs {
	if f == nil {
		return nil
	}
	return func(cmd *cobra.Command, args []string) error {
		if err := f(cmd, args); err != nil {
			return &usageError{err}
		}
		return nil
	}
}

// dirArg is the argument validator of commands that take one log directory.
func dirArg(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return errors.New("missing log directory argument")
	case len(args) > 1:
		return fmt.Errorf("want one log directory, got %d arguments: %s", len(args), strings.Join(args, " "))
	case args[0] == "":
		return errors.New("empty log directory argument")
	}
	return nil
}

// checkLogDir is checkDir, then checkNotStore: for the commands that read
// or repair a log directory.
func checkLogDir(dir string) error {
	if err := checkDir(dir); err != nil {
		return err
	}
	return checkNotStore(dir)
}

// checkDir reports a clear error when dir does not exist or is not a
// directory, before the wal package is asked to open it.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: no such directory", dir)
	case err != nil:
		return err
	case !fi.IsDir() && hasShmHeader(dir):
		return fmt.Errorf("%s: a shared-memory log file, not a log directory: \"appendlog verify %s\" checks it, \"appendlog dump %s\" prints it", dir, dir, dir)
	case !fi.IsDir():
		return fmt.Errorf("%s: not a directory (want a log directory holding *.seg files)", dir)
	}
	return nil
}

// checkShmFile reports a clear error when path does not exist or is a
// directory, before package shmlog is asked to open it.
func checkShmFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: no such file", path)
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s: a directory, not a shared-memory log file (\"appendlog verify %s\" checks a log directory)", path, path)
	}
	return nil
}
