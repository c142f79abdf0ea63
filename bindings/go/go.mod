module sluice.dev/go

go 1.19
