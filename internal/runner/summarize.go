package runner

import "github.com/vnetlab/vnetlab/internal/analysis"

// A run's cells are summarised and compared by internal/analysis (Run calls
// analysis.Analyze); these names let a Spec and the CLI say how.

// SummaryOptions say how cells are summarised: CV threshold, CI method, baseline mode.
type SummaryOptions = analysis.Options

// DefaultCVThreshold flags a cell as noisy above 10% coefficient of variation.
const DefaultCVThreshold = analysis.DefaultCVThreshold

// CIMethods lists the accepted CI methods, the default first.
var CIMethods = analysis.CIMethods
