module github.com/appendlog/appendlog

go 1.26
