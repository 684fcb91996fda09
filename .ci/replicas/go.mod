module corral-ci-replicas

go 1.25.0
