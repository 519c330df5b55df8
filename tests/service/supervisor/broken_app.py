"""An app whose import fails: every worker exits with the boot-failure code."""

raise RuntimeError("this app cannot be imported (on purpose, for the crash-loop test)")
