package datapath

// IPsecForTest returns the ipsec datapath with opts and test hooks: the site
// named wrongPSK (if any) keys with a PSK unlike every other site's;
// ignoreSAErrors makes Setup go on when an SA does not come up; brokenConf
// gives charon a strongswan.conf that does not parse.
func IPsecForTest(opts map[string]any, wrongPSK string, ignoreSAErrors, brokenConf bool) (Datapath, error) {
	p, err := newIPsec(opts)
	if err != nil {
		return nil, err
	}
	p.wrongPSK, p.ignoreSAErrors, p.brokenConf = wrongPSK, ignoreSAErrors, brokenConf
	return p, nil
}
