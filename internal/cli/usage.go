package cli

import (
	"regexp"
	"strings"
)

var (
	// usageFlag is a flag named in a usage line: --name, --name=value.
	usageFlag = regexp.MustCompile(`--([A-Za-z0-9][A-Za-z0-9_.-]*)`)
	// defaultsFlag is a flag in flag.PrintDefaults: "  -name type".
	defaultsFlag = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9_.-]*)`)
)

// UsageFindings checks a command's help (what -h prints: the line
// "Usage: sluice NAME ARGS", then flag.PrintDefaults) against its flags,
// and says what is wrong with its usage line ("" when nothing): a --name
// there that is not a flag, or a flag missing from it. A usage line that
// says "[flags]" need not name every flag (the rest are listed below it).
func UsageFindings(help string) string {
	line, rest, _ := strings.Cut(help, "\n")
	if !strings.HasPrefix(line, "Usage: ") {
		return "no \"Usage: \" line first"
	}
	flags := map[string]bool{}
	for _, m := range defaultsFlag.FindAllStringSubmatch(rest, -1) {
		flags[m[1]] = true
	}
	named := map[string]bool{}
	var findings []string
	for _, m := range usageFlag.FindAllStringSubmatch(line, -1) {
		if !flags[m[1]] && !named[m[1]] {
			findings = append(findings, "the usage line names --"+m[1]+", which is not a flag")
		}
		named[m[1]] = true
	}
	if !strings.Contains(line, "[flags]") {
		var missing []string
		for _, m := range defaultsFlag.FindAllStringSubmatch(rest, -1) {
			if !named[m[1]] {
				missing = append(missing, "--"+m[1])
			}
		}
		if len(missing) > 0 {
			findings = append(findings, "the usage line omits "+strings.Join(missing, ", ")+" (name them, or say [flags])")
		}
	}
	return strings.Join(findings, "; ")
}
