"""The checks, one pytest module per stage. Each test is one check, marked with @check."""
