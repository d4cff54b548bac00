// Handlers of the data-layer route group.
import type { dataLayerRoutes } from '../api/data-layer.js';
import type { Handlers } from '../deps.js';

export const dataLayerHandlers: Handlers<typeof dataLayerRoutes> = {};
