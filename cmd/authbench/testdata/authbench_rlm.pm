# authbench's rlm_perl module: FreeRADIUS in front of the HTTP API, the way
# sites run privacyIDEA's plugin. One POST /validate/check per
# Access-Request (user, pass, realm, and the State back as transaction_id);
# the answer becomes the RLM code, Reply-Message and State. Written for
# authbench; it logs nothing, so no password or OTP reaches a log.
use strict;
use warnings;
use HTTP::Tiny;
use JSON::PP;

our (%RAD_REQUEST, %RAD_REPLY, %RAD_CHECK, %RAD_PERLCONF);

use constant {
	RLM_MODULE_REJECT   => 0,
	RLM_MODULE_FAIL     => 1,
	RLM_MODULE_OK       => 2,
	RLM_MODULE_HANDLED  => 3,
	RLM_MODULE_NOTFOUND => 6,
};

my $http; # one per interpreter: rlm_perl clones one per thread

sub authenticate {
	$http //= HTTP::Tiny->new(
		agent      => 'FreeRADIUS',
		timeout    => 10,
		keep_alive => 0, # a connection per request, as privacyIDEA's plugin
	);
	my %form = (user => $RAD_REQUEST{'User-Name'} // '', pass => $RAD_REQUEST{'User-Password'} // '');
	$form{realm} = $RAD_PERLCONF{realm} if length($RAD_PERLCONF{realm} // '');
	if (defined(my $st = $RAD_REQUEST{'State'})) {
		$form{state} = $st =~ /^0x([0-9a-fA-F]*)$/ ? pack('H*', $1) : $st;
	}
	my $res = $http->post_form($RAD_PERLCONF{url}, \%form);
	my $body = eval { decode_json($res->{content} // '') };
	if (ref($body) ne 'HASH' || ref($body->{result}) ne 'HASH') {
		$RAD_REPLY{'Reply-Message'} = "request failed: $res->{status} $res->{reason}";
		return RLM_MODULE_FAIL;
	}
	my ($result, $detail) = ($body->{result}, $body->{detail} // {});
	if ($result->{value}) {
		$RAD_REPLY{'Reply-Message'} = 'access granted';
		return RLM_MODULE_OK;
	}
	if ($result->{status}) {
		$RAD_REPLY{'Reply-Message'} = $detail->{message} // '';
		if ($detail->{transaction_id}) {
			$RAD_REPLY{'State'} = '0x' . unpack('H*', $detail->{transaction_id});
			$RAD_REPLY{'Message-Authenticator'} = '0x00';
			$RAD_CHECK{'Response-Packet-Type'} = 'Access-Challenge';
			return RLM_MODULE_HANDLED;
		}
		return RLM_MODULE_REJECT;
	}
	my $err = $result->{error} // {};
	$RAD_REPLY{'Reply-Message'} = $err->{message} // 'error';
	return ($err->{code} // 0) == 904 ? RLM_MODULE_NOTFOUND : RLM_MODULE_FAIL;
}

1;
