/* procmem.h — the process's memory, for tools that report it (Linux /proc;
 * 0 where unknown). */
#ifndef HM_PROCMEM_H
#define HM_PROCMEM_H

/* Peak resident bytes (getrusage ru_maxrss, KiB on Linux, × 1024). */
double hm_procmem_peak_rss(void);
/* Resident bytes now (/proc/self/statm). */
double hm_procmem_rss(void);
/* Resets the peak to the current resident size (/proc/self/clear_refs "5",
 * which ru_maxrss follows); 1 on success, 0 where not allowed. */
int hm_procmem_reset_peak(void);

/* CPU seconds of the process (all threads): less sensitive than wall time
 * to other programs on a shared machine. */
double hm_procmem_cpu_seconds(void);

#endif
