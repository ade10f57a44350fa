import type { ConnectRouter } from "@connectrpc/connect";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import { QrService } from "../../gen/payments/v1/qr_pb.ts";
import { ReadinessService } from "../../gen/payments/v1/readiness_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { SandboxService } from "../../gen/payments/v1/sandbox_pb.ts";
import { CheckoutService, SiteService } from "../../gen/payments/v1/shopper_pb.ts";
import { TerminalService } from "../../gen/payments/v1/terminal_pb.ts";
import { WebhookService } from "../../gen/payments/v1/webhooks_pb.ts";
import { ApiKeyService } from "../../gen/payments/v1/api_keys_pb.ts";
import { apiKeyService, type ApiKeyDeps } from "../api-keys/service.ts";
import { MerchantService } from "../../gen/payments/v1/merchants_pb.ts";
import { merchantService } from "../merchants/service.ts";
import { DashboardService } from "../../gen/payments/v1/dashboard_pb.ts";
import { dashboardService, type DashboardDeps } from "../dashboard/service.ts";
import { adminService, type AdminDeps } from "../admin/service.ts";
import { chainService, type ChainDeps } from "../chains/service.ts";
import { intentService, type IntentDeps } from "../intents/service.ts";
import { observationService } from "../observations/service.ts";
import { transactionsOf } from "../chains/outputs.ts";
import { qrService } from "../qr/service.ts";
import { readinessService, type ReadinessDeps } from "../readiness/service.ts";
import { sandboxService } from "../sandbox/service.ts";
import { checkoutService } from "../checkout/service.ts";
import { siteService } from "../site/service.ts";
import { terminalService } from "../terminal/service.ts";
import { webhookService, type WebhookDeps } from "../webhooks/service.ts";
import { replayable } from "../rpc/replayable.ts";
import { RefundClaimService, RefundService } from "../../gen/payments/v1/refunds_pb.ts";
import { Refunds } from "../refunds/refunds.ts";
import { refundClaimService, refundService } from "../refunds/service.ts";
import { RefundViews } from "../refunds/views.ts";

/** Every service the RPC server exposes; the gateway routes those with (payments.v1.route) options. */
export const services: readonly DescService[] = [IntentService, WebhookService, SandboxService, ObservationService, SiteService, CheckoutService, QrService, ReadinessService, TerminalService, AdminService, ChainService, DashboardService, ApiKeyService, MerchantService, RefundService, RefundClaimService];

/** Idempotent methods whose handler writes its key's claim in the same statement as its rows (services/rpc/interceptor.ts). */
export const oneStatementMethods: ReadonlySet<DescMethod> = new Set([IntentService.method.createPaymentIntent]);

export function routes(deps: Omit<IntentDeps, "transactionsOf"> & WebhookDeps & ReadinessDeps & ChainDeps & AdminDeps & DashboardDeps & ApiKeyDeps) {
  const refunds = new Refunds(deps.intents, transactionsOf, new RefundViews(deps.intents.views.checkoutBaseUrl));
  return (router: ConnectRouter) => {
    router.service(IntentService, replayable(intentService({ ...deps, transactionsOf })));
    router.service(RefundService, replayable(refundService({ refunds })));
    router.service(RefundClaimService, replayable(refundClaimService({ refunds })));
    router.service(WebhookService, replayable(webhookService(deps)));
    router.service(SandboxService, replayable(sandboxService({ ...deps, refunds })));
    router.service(ObservationService, replayable(observationService(deps)));
    router.service(SiteService, replayable(siteService({ ...deps, transactionsOf })));
    router.service(CheckoutService, replayable(checkoutService({ ...deps, transactionsOf })));
    router.service(QrService, replayable(qrService()));
    router.service(ReadinessService, replayable(readinessService(deps)));
    router.service(TerminalService, replayable(terminalService(deps)));
    router.service(AdminService, replayable(adminService(deps)));
    // A block report settles the refunds on its chain too, in its transaction (refunds.ts settleChain).
    router.service(ChainService, replayable(chainService({ ...deps, settleOthers: (tx, chain, at) => refunds.settleChain(tx, chain, at) })));
    router.service(DashboardService, replayable(dashboardService(deps)));
    router.service(ApiKeyService, replayable(apiKeyService(deps)));
    router.service(MerchantService, replayable(merchantService()));
  };
}
