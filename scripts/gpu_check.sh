#!/usr/bin/env bash
# The GPU check grew into the device check (TPU and GPU): scripts/device_check.sh, same options.
exec bash "$(dirname "$0")/device_check.sh" "$@"
