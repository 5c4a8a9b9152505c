// Package monitoring owns what the server observes about itself and keeps
// for administrators: the statistics time series (GET /monitoring/...,
// written by the server's periodic recorder: the SimpleStats token
// numbers and the Counter event handler's counters) with their retention,
// the dates of the statistics endpoints, and the client applications that
// authenticate against the server (GET /client/).
//
// Its buckets are monitoring.stats, monitoring.statsmeta and clientapps;
// no other package reads them.
//
// Package monitoring sits on floor 2: it imports only floor 1 packages
// (apierr, store) and knows nothing of HTTP, tokens or the root package;
// the root package computes the values and hands them in.
package monitoring
