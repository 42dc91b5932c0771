package io.github.mcpsealer;

import io.github.mcpsealer.SealerException.Cause;
import sealer.v1.SealerOuterClass.Flow;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * The checks of a reply: every answer of the sealer has the fields checked
 * here, so a reply without them (another service's 200, a proxy's page that
 * parsed as an empty message) is NOT_THE_SEALER, never a result.
 */
final class Replies {
  private Replies() {}

  static SealResponse sealed(SealResponse res, boolean askedFlow) {
    if (res.getRequestState().isEmpty() || !res.hasExpiresAt()) {
      throw notTheSealers();
    }
    if (res.hasFlow()) {
      checkFlow(res.getFlow());
    } else if (askedFlow) {
      // A release without flows ignores the request and seals a plain
      // state: never hand that out as a round of a flow.
      throw SealerException.failure(Cause.NOT_THE_SEALER, 0, "sealer: the sealer sealed no flow (a release without flows?)");
    }
    return res;
  }

  static OpenResponse opened(OpenResponse res) {
    if (!res.hasIssuedAt() || !res.hasExpiresAt()) {
      throw notTheSealers();
    }
    // An outcome answers a retry, which consumes nothing and has no payload.
    if (res.hasOutcome() && (!res.getOutcome().hasRecordedAt() || res.getRecording() || !res.getPayload().isEmpty())) {
      throw notTheSealers();
    }
    if (res.hasFlow()) {
      checkFlow(res.getFlow());
    }
    return res;
  }

  static RecordResponse recorded(RecordResponse res) {
    if (!res.hasKeptUntil()) {
      throw notTheSealers();
    }
    return res;
  }

  private static void checkFlow(Flow f) {
    if (f.getId().size() != 16 || f.getRound() == 0 || !f.hasDeadline()) {
      throw SealerException.failure(Cause.NOT_THE_SEALER, 0, "sealer: malformed flow in the sealer's reply");
    }
  }

  private static SealerException notTheSealers() {
    return SealerException.failure(Cause.NOT_THE_SEALER, 0, "sealer: the reply is not the sealer's");
  }
}
