/* verify_bundle.h — the bundle check of hm-verify (tools/hm-verify.c). */
#ifndef HM_VERIFY_BUNDLE_H
#define HM_VERIFY_BUNDLE_H

/* Checks the bundle at path (folder or archive) against its MANIFEST.json and
 * prints each finding and a verdict (json: one object {version, check, valid,
 * files, tensors, findings [{member, tensor, message}]}). Returns the exit
 * status: 0 valid, 1 findings, 2 could not check (the reason printed). */
int hm_verify_bundle_cli(const char *path, int json);

#endif
