module nbdkit.local/golang

go 1.19
