package main

// This file holds the standard metrics of /metrics: those of the process
// (process_*) and of the Go runtime (go_*), with the names, types and help
// texts of the Prometheus Go client's process and Go collectors, so that the
// dashboards and alerts written for any Go service work on corral as they
// are. processmetrics_linux.go reads the process's from /proc; on other
// systems they are left out.

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// processStats is what the process_* metrics report.
type processStats struct {
	cpuSeconds      float64 // user and system
	residentBytes   float64
	virtualBytes    float64
	maxVirtualBytes float64 // the address-space limit; 2^64-1 when unlimited
	startTime       float64 // seconds since the Unix epoch
	openFDs, maxFDs float64
}

// writeProcessMetrics writes the process_* metrics, or nothing where
// readProcessStats cannot read them (another system than Linux, no /proc).
func writeProcessMetrics(b *strings.Builder) {
	st, err := readProcessStats()
	if err != nil {
		return
	}
	counterValue(b, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", st.cpuSeconds)
	gaugeValue(b, "process_open_fds", "Number of open file descriptors.", st.openFDs)
	gaugeValue(b, "process_max_fds", "Maximum number of open file descriptors.", st.maxFDs)
	gaugeValue(b, "process_virtual_memory_bytes", "Virtual memory size in bytes.", st.virtualBytes)
	gaugeValue(b, "process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", st.maxVirtualBytes)
	gaugeValue(b, "process_resident_memory_bytes", "Resident memory size in bytes.", st.residentBytes)
	gaugeValue(b, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", st.startTime)
}

// runtimeSamples are the runtime/metrics the go_memstats_* metrics are made
// of, as the Prometheus Go client makes them since Go 1.17.
var runtimeSamples = [...]string{
	"/sched/goroutines:goroutines",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/total:bytes",
}

// writeRuntimeMetrics writes the go_* metrics. None of them stops the world.
func writeRuntimeMetrics(b *strings.Builder) {
	samples := make([]metrics.Sample, len(runtimeSamples))
	for i, name := range runtimeSamples {
		samples[i].Name = name
	}
	metrics.Read(samples)
	v := func(i int) float64 {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			return float64(samples[i].Value.Uint64())
		}
		return 0 // not in this Go version
	}
	gaugeValue(b, "go_goroutines", "Number of goroutines that currently exist.", v(0))
	threads, _ := runtime.ThreadCreateProfile(nil)
	gaugeValue(b, "go_threads", "Number of OS threads created.", float64(threads))
	gaugeValue(b, "go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", v(1))
	gaugeValue(b, "go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", v(1)+v(2))
	gaugeValue(b, "go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", v(3))
	writeGCDurations(b)
	metricFamily(b, "go_info", "gauge", "Information about the Go environment.")
	fmt.Fprintf(b, "go_info{version=\"%s\"} 1\n", labelValue(runtime.Version()))
}

// writeGCDurations writes the summary of the garbage collector's pauses:
// their quartiles over the last pauses the runtime keeps, and the total and
// count of all of them.
func writeGCDurations(b *strings.Builder) {
	stats := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)}
	debug.ReadGCStats(&stats)
	metricFamily(b, "go_gc_duration_seconds", "summary", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	for i, q := range stats.PauseQuantiles {
		fmt.Fprintf(b, "go_gc_duration_seconds{quantile=\"%s\"} %s\n", formatValue(float64(i)/4), formatValue(q.Seconds()))
	}
	fmt.Fprintf(b, "go_gc_duration_seconds_sum %s\n", formatValue(stats.PauseTotal.Seconds()))
	fmt.Fprintf(b, "go_gc_duration_seconds_count %d\n", stats.NumGC)
}

// gaugeValue writes a gauge without labels, and counterValue a counter.
func gaugeValue(b *strings.Builder, name, help string, v float64) {
	metricFamily(b, name, "gauge", help)
	fmt.Fprintf(b, "%s %s\n", name, formatValue(v))
}

func counterValue(b *strings.Builder, name, help string, v float64) {
	metricFamily(b, name, "counter", help)
	fmt.Fprintf(b, "%s %s\n", name, formatValue(v))
}

// formatValue writes v as the Prometheus Go client does.
func formatValue(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}
